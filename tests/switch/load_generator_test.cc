// The load generator: Zipf draws follow 1/r^s (seeded, so a run replays), s = 0 is uniform, bad
// parameters are refused; a Zipf load over several models through a live server answers every
// request and counts each model's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "ferry/ferry.h"
#include "ferry/switch/load_generator.h"
#include "ferry/switch/server.h"
#include "tests/support/errors.h"
#include "tests/support/random.h"
#include "tests/switch/switch_test_util.h"

namespace ferry::switch_ {
namespace {

using ::ferry::testing::error_of;
using ::testing::HasSubstr;

TEST(SwitchLoad, ZipfDrawsFollowTheirProbabilities) {
  SCOPED_TRACE(::ferry::testing::seed_trace());
  const ZipfSampler zipf(4, 1.0);
  const double h = 1 + 1.0 / 2 + 1.0 / 3 + 1.0 / 4;
  for (size_t r = 0; r < 4; ++r) EXPECT_NEAR(zipf.probability(r), 1.0 / (r + 1) / h, 1e-12);
  std::mt19937_64 rng = ::ferry::testing::test_rng();
  std::vector<int> counts(4, 0);
  constexpr int kDraws = 40000;
  for (int i = 0; i < kDraws; ++i) ++counts.at(zipf(rng));
  for (size_t r = 0; r < 4; ++r) {
    // Five standard deviations of a binomial count.
    const double p = zipf.probability(r);
    EXPECT_NEAR(counts[r], kDraws * p, 5 * std::sqrt(kDraws * p * (1 - p))) << "rank " << r;
  }
  const ZipfSampler uniform(3, 0.0);
  for (size_t r = 0; r < 3; ++r) EXPECT_NEAR(uniform.probability(r), 1.0 / 3, 1e-12);
  std::mt19937_64 a(5), b(5);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(zipf(a), zipf(b));
}

TEST(SwitchLoad, BadParametersAreRefused) {
  EXPECT_THAT(error_of<Error>([] { ZipfSampler(0, 1.0); }), HasSubstr("at least one item"));
  EXPECT_THAT(error_of<Error>([] { ZipfSampler(3, -1.0); }), HasSubstr("exponent >= 0, got -1"));
  LoadSpec spec;
  spec.models = {"a", "b"};
  spec.inputs = {{}, {}, {}};
  EXPECT_THAT(error_of<Error>([&] { run_load(spec, [] { return std::unique_ptr<Client>(); }); }),
              HasSubstr("one per model (2), got 3"));
}

TEST(SwitchLoad, AZipfLoadOverAServerCountsEveryModel) {
  testing::TempDir dir;
  auto handler = std::make_shared<testing::ScriptedHandler>();
  ServerOptions options;
  options.socket_path = dir.file("ferry.sock");
  Server server(options, handler);
  LoadSpec spec;
  spec.models = {"echo", "sleep-1"};
  spec.inputs = {{{"x", ones({2})}}};
  spec.requests = 30;
  spec.clients = 3;
  spec.zipf = 1.0;
  spec.seed = 11;
  const LoadReport r =
      run_load(spec, [&] { return std::make_unique<Client>(server.socket_path()); });
  EXPECT_EQ(r.ok, 30);
  EXPECT_EQ(r.failed, 0) << r.first_error;
  EXPECT_EQ(r.per_model[0] + r.per_model[1], 30);
  EXPECT_LE(r.p50_ms, r.p99_ms);
  // The same seed draws the same models.
  const LoadReport again =
      run_load(spec, [&] { return std::make_unique<Client>(server.socket_path()); });
  EXPECT_EQ(again.per_model, r.per_model);
}

}  // namespace
}  // namespace ferry::switch_
