// Every nn layer (torch::nn's names under ferry::nn): include this for the lot.
#pragma once

#include "ferry/nn/layers/activation.h"
#include "ferry/nn/layers/attention.h"
#include "ferry/nn/layers/batchnorm.h"
#include "ferry/nn/layers/container.h"
#include "ferry/nn/layers/conv.h"
#include "ferry/nn/layers/embedding.h"
#include "ferry/nn/layers/init.h"
#include "ferry/nn/layers/layernorm.h"
#include "ferry/nn/layers/linear.h"
#include "ferry/nn/layers/pooling.h"
#include "ferry/nn/layers/transformer.h"
