#!/usr/bin/env bash
# tests/explain/explain_test.sh: runs dtensor-explain and checks its exact
# output. Usage: explain_test.sh PATH/TO/dtensor-explain
# Checks: tests/support/cli_checks.sh.
set -u

tool="${1:?usage: explain_test.sh PATH/TO/dtensor-explain}"
tool_name=dtensor-explain
source "$(dirname "$0")/../support/cli_checks.sh"

# (a) The design's example: [15, 5] as [SS(0,2), S(0)] on a (4, 2) mesh puts
# dim-0 offsets 0,8,2,10,4,12,6,14 on ranks 0..7.
case_name="layout text"
run layout --mesh 4,2 --shape 15,5 --placements "SS(0,2),S(0)"
expect_rc 0
expect_out "layout of [15, 5] on mesh (4, 2) as SS(0,2),S(0)
rank  coordinate  local_shape  global_offset
0     [0, 0]      [2, 5]       [0, 0]
1     [0, 1]      [2, 5]       [8, 0]
2     [1, 0]      [2, 5]       [2, 0]
3     [1, 1]      [2, 5]       [10, 0]
4     [2, 0]      [2, 5]       [4, 0]
5     [2, 1]      [2, 5]       [12, 0]
6     [3, 0]      [2, 5]       [6, 0]
7     [3, 1]      [1, 5]       [14, 0]"

case_name="layout text --indices, --opt=value"
run layout --mesh=4,2 --shape=15,5 --placements=SS\(0,2\),S\(0\) --indices
expect_rc 0
expect_line "rank  coordinate  local_shape  global_offset  indices"
expect_line "1     [0, 1]      [2, 5]       [8, 0]         d0=[8, 9]"
expect_line "7     [3, 1]      [1, 5]       [14, 0]        d0=[14]"

# The design's StridedShard example: L=9, sf=2, n=4 gives [0,1,5],[2,3,6],[4,7],[8];
# and runs of three or more indices print as first..last.
case_name="layout strided indices"
run layout --mesh 4 --shape 9 --placements "SS(0,2)" --indices
expect_rc 0
expect_line "0     [0]         [3]          [0]            d0=[0, 1, 5]"
expect_line "3     [3]         [1]          [8]            d0=[8]"
run layout --mesh 2 --shape 100,3 --placements "SS(0,3)" --indices
expect_line "1     [1]         [50, 3]      [17, 0]        d0=[17..33, 51..67, 84..99]"

# (b) JSON: one object per rank, exactly these fields in this order.
case_name="layout json"
run layout --mesh 4,2 --shape 15,5 --placements "SS(0,2),S(0)" --json
expect_rc 0
expect_count 8 '^\{"rank":[0-7],"coordinate":\[[0-3],[01]\],"local_shape":\[[12],5\],"global_offset":\[[0-9]+,0\]\}$'
expect_line '{"rank":0,"coordinate":[0,0],"local_shape":[2,5],"global_offset":[0,0]}'
expect_line '{"rank":3,"coordinate":[1,1],"local_shape":[2,5],"global_offset":[10,0]}'
expect_line '{"rank":7,"coordinate":[3,1],"local_shape":[1,5],"global_offset":[14,0]}'

# An empty shard's offset is the dim size (5 over 4 ranks: sizes 2,2,1,0).
case_name="layout json --indices, empty shard"
run layout --mesh 4 --shape 5,2 --placements "S(0)" --json --indices
expect_rc 0
expect_out '{"rank":0,"coordinate":[0],"local_shape":[2,2],"global_offset":[0,0],"indices":[[0,1],[0,1]]}
{"rank":1,"coordinate":[1],"local_shape":[2,2],"global_offset":[2,0],"indices":[[2,3],[0,1]]}
{"rank":2,"coordinate":[2],"local_shape":[1,2],"global_offset":[4,0],"indices":[[4],[0,1]]}
{"rank":3,"coordinate":[3],"local_shape":[0,2],"global_offset":[5,0],"indices":[[],[0,1]]}'

# (c) S(1) -> S(0) on the inner mesh dim is one all-to-all, nothing else.
case_name="plan json"
run plan --mesh 2,2 --shape 8,8 --from "S(0),S(1)" --to "S(0),S(0)" --json
expect_rc 0
expect_count 2 '.'
expect_count 1 '^\{"step":1,"mesh_dim":1,"mesh_dims":\[1\],"src":"S\(0\),S\(1\)","dst":"S\(0\),S\(0\)","collective":"all_to_all[a-z_]*","bytes":[0-9]+,"max_bytes":[0-9]+,"cost_us":[0-9.]+\}$'
expect_count 1 '^\{"totals":\{"steps":1,"collectives":1,"bytes":[0-9]+,"cost_us":[0-9.]+\}\}$'

# A step merged over both mesh dims has no single mesh_dim.
case_name="plan json merged step"
run plan --mesh 2,2 --shape 8,8 --from "S(0),S(0)" --to "R,R" --json
expect_rc 0
expect_count 1 '^\{"step":1,"mesh_dim":null,"mesh_dims":\[0,1\],"src":"S\(0\),S\(0\)","dst":"R,R",'

# Mesh dims 0 and 2 change alike: one all-reduce over both, not adjacent.
case_name="plan json non-adjacent merged step"
run plan --mesh 2,2,2 --shape 8,8 --from "P(sum),R,P(sum)" --to "R,R,R" --json
expect_rc 0
expect_count 1 '^\{"step":1,"mesh_dim":null,"mesh_dims":\[0,2\],"src":"P\(sum\),R,P\(sum\)","dst":"R,R,R","collective":"all_reduce",'
expect_count 1 '^\{"totals":\{"steps":1,"collectives":1,'

case_name="plan text"
run plan --mesh 2,2 --shape 8,8 --from "S(0),S(1)" --to "S(0),S(0)" --dtype float64
expect_rc 0
expect_line "plan for [8, 8] float64 on mesh (2, 2): S(0),S(1) -> S(0),S(0)"
expect_count 1 '^step +mesh dims +from +to +collective +bytes \(rank 0\) +max bytes +est us$'
expect_count 1 '^1 +\[1\] +S\(0\),S\(1\) +S\(0\),S\(0\) +all_to_all'
expect_count 1 '^totals: steps 1, collectives 1, bytes \(rank 0\) [0-9]+, est [0-9.]+ us$'

case_name="plan nothing to do"
run plan --mesh 2 --shape 4 --from "S(0)" --to "S(0)" --json
expect_rc 0
expect_out '{"totals":{"steps":0,"collectives":0,"bytes":0,"cost_us":0.000}}'

case_name="plan from Partial"
run plan --mesh 2,2 --shape 8,8 --from "P(sum),R" --to "S(0),R" --json
expect_rc 0
expect_count 1 '"totals":\{"steps":1,"collectives":1,'

# (d) Bad input: exit 2 and one line on stderr, also for multi-line
# dtensor::Error messages (the parser's caret).
case_name="malformed placements"
run layout --mesh 4,2 --shape 15,5 --placements "S(0"
expect_error "parse_placements: expected ')' at column 4"

case_name="unknown subcommand"
run explode --mesh 2
expect_error "unknown subcommand 'explode'"

case_name="mesh size 0"
run layout --mesh 0 --shape 4 --placements "S(0)"
expect_error "--mesh: expected sizes >= 1"

case_name="placement count mismatch"
run plan --mesh 2,2 --shape 8,8 --from "S(0)" --to "R,R"
expect_error "--from: expected one placement per mesh dim (2), found 1"

case_name="missing option"
run layout --mesh 4 --placements "S(0)"
expect_error "missing option --shape"

case_name="malformed number"
run layout --mesh 4 --shape 15,x --placements "S(0)"
expect_error "--shape: expected comma-separated non-negative integers"

case_name="dim out of range"
run layout --mesh 4 --shape 15 --placements "S(3)"
expect_error "S(3)"

case_name="unknown dtype"
run plan --mesh 2 --shape 4 --from "S(0)" --to R --dtype float8
expect_error "--dtype: expected one of"

case_name="ragged units whose sum overflows"
unit=999999999999999999
run layout --mesh 10 --shape 4 --placements "RG(dims=1,units=[$unit,$unit,$unit,$unit,$unit,$unit,$unit,$unit,$unit,$unit])"
expect_error "a list whose sum fits in 64 bits"

case_name="shape whose bytes overflow"
run plan --mesh 2 --shape 4294967296,4294967296 --from "S(0)" --to R
expect_error "expected sizes whose strides and product in bytes fit in 64 bits"

# Arithmetic at the edge of int64 and huge split factors answer at once.
case_name="largest extent"
run layout --mesh 2 --shape 9223372036854775807 --placements "S(0)" --json
expect_rc 0
expect_count 1 '"local_shape":\[4611686018427387904\],"global_offset":\[0\]'
expect_count 1 '"local_shape":\[4611686018427387903\],"global_offset":\[4611686018427387904\]'

case_name="huge split factor"
run layout --mesh 2 --shape 4 --placements "SS(0,999999999999999999)" --json --indices
expect_rc 0
expect_count 1 '"rank":0,.*"local_shape":\[4\],.*"indices":\[\[0,1,2,3\]\]'
expect_count 1 '"rank":1,.*"local_shape":\[0\],"global_offset":\[4\]'

case_name="no subcommand"
run
expect_error "expected a subcommand"

case_name="help"
run plan --help
expect_rc 0
expect_count 1 '^Usage:$'

finish_checks explain_cli
