// Copyright 2026 The dtensor Authors.
//
// placements/placements.h: every built-in placement, their parser and the
// layout functions, in one include.
#pragma once

#include "placements/layout.h"
#include "placements/parse.h"
#include "placements/partial.h"
#include "placements/placement.h"
#include "placements/ragged.h"
#include "placements/replicate.h"
#include "placements/shard.h"
#include "placements/strided_shard.h"
