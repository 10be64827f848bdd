// Copyright 2026 The dtensor Authors.
//
// placements/placements.h: every built-in placement, their parser and the
// layout functions, in one include.
#pragma once

#include <dtensor/placements/layout.h>
#include <dtensor/placements/parse.h>
#include <dtensor/placements/partial.h>
#include <dtensor/placements/placement.h>
#include <dtensor/placements/ragged.h>
#include <dtensor/placements/replicate.h>
#include <dtensor/placements/shard.h>
#include <dtensor/placements/strided_shard.h>
