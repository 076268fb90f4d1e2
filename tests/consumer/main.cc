// Uses the installed ferry: builds a tensor, views it, reads an element.
#include <ferry/ferry.h>

#include <cstdio>

int main() {
  ferry::Tensor a = ferry::arange(24, ferry::kFloat).view({2, 3, 4});
  const float x = a.permute({2, 1, 0}).select(0, 1).select(0, 2).select(0, 0).item<float>();
  std::printf("consumer: ferry works, element = %g\n", x);
  return x == 9.0f ? 0 : 1;
}
