// Uses the installed ferry as a user would, through <ferry/ferry.h> alone: builds a tensor,
// views it, reads an element, and uses what the README and docs name (set_num_threads, the
// PyTorch enumerator names, cpu:0, DLPack exchange).
#include <ferry/ferry.h>

#include <cstdio>

int main() {
  ferry::set_num_threads(1);
  ferry::Tensor a = ferry::arange(24, ferry::ScalarType::Float).view({2, 3, 4});
  const float x = a.permute({2, 1, 0}).select(0, 1).select(0, 2).select(0, 0).item<float>();
  ferry::Tensor shared = ferry::from_dlpack(ferry::to_dlpack(a.permute({2, 1, 0})));
  const bool ok = x == 9.0f && ferry::get_num_threads() == 1 &&
                  ferry::Device("cpu:0").index() == 0 && shared.data_ptr() == a.data_ptr();
  std::printf("consumer: ferry works, element = %g, %s\n", x, ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
