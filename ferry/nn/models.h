// The model zoo: ResNet (torchvision's names), BERT (Hugging Face's names) and an MLP.
#pragma once

#include "ferry/nn/models/bert.h"
#include "ferry/nn/models/mlp.h"
#include "ferry/nn/models/resnet.h"
