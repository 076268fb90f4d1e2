// ferry/pipeline: pipeline parallelism (torchgpipe in C++). One include for the layer.
#pragma once

#include "ferry/pipeline/balance.h"
#include "ferry/pipeline/batchnorm.h"
#include "ferry/pipeline/checkpoint.h"
#include "ferry/pipeline/copy.h"
#include "ferry/pipeline/dependency.h"
#include "ferry/pipeline/function.h"
#include "ferry/pipeline/gpipe.h"
#include "ferry/pipeline/microbatch.h"
#include "ferry/pipeline/schedule.h"
#include "ferry/pipeline/stream.h"
#include "ferry/pipeline/trace.h"
