// ferry's umbrella header: the whole public API.
#pragma once

#include "ferry/core/device.h"
#include "ferry/core/error.h"
#include "ferry/core/generator.h"
#include "ferry/core/memory_format.h"
#include "ferry/core/scalar.h"
#include "ferry/core/scalar_type.h"
#include "ferry/core/storage.h"
#include "ferry/core/tensor.h"
#include "ferry/core/tensor_options.h"
#include "ferry/ops/factories.h"
