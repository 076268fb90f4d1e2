// The MLP builder (see mlp.h).
#include "ferry/nn/models/mlp.h"

#include "ferry/core/error.h"
#include "ferry/nn/layers/activation.h"
#include "ferry/nn/layers/init.h"
#include "ferry/nn/layers/linear.h"

namespace ferry::nn::models {

Sequential mlp(int64_t in_features, const std::vector<int64_t>& hidden_sizes, int64_t out_features,
               MLPOptions options) {
  FERRY_CHECK(options.activation == "relu" || options.activation == "gelu",
              "mlp: expected activation relu or gelu, given '", options.activation, "'");
  init::InitSeed seed(options.seed);
  Sequential net;
  int64_t in = in_features;
  for (int64_t hidden : hidden_sizes) {
    net->push_back(Linear(in, hidden, options.bias));
    if (options.activation == "relu") {
      net->push_back(ReLU());
    } else {
      net->push_back(GELU());
    }
    if (options.dropout > 0.0) net->push_back(Dropout(options.dropout));
    in = hidden;
  }
  net->push_back(Linear(in, out_features, options.bias));
  return net;
}

}  // namespace ferry::nn::models
