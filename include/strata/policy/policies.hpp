#pragma once
// The whole policy vocabulary, one header per category.
#include "strata/policy/category.hpp"
#include "strata/policy/collective.hpp"
#include "strata/policy/compression.hpp"
#include "strata/policy/consistency.hpp"
#include "strata/policy/gradient.hpp"
#include "strata/policy/partition.hpp"
#include "strata/policy/placement.hpp"
#include "strata/policy/tensor.hpp"
