// Formatting helpers for the layers' extra_repr: Python's spelling of floats (repr), bools and
// tuples, so ferry's module trees print as PyTorch's do ("eps=1e-05", "(64,)", "bias=False").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ferry::nn::repr {

// Python's repr(float): shortest round-trip digits, positional for 1e-4 <= |x| < 1e16 (with
// ".0" when integral), else scientific with a two-digit exponent ("1e-05"); "inf", "nan".
std::string py_float(double value);
// "True" / "False".
inline std::string py_bool(bool value) { return value ? "True" : "False"; }
// Python's tuple: "(3, 3)", one element "(64,)", none "()".
std::string py_tuple(const std::vector<int64_t>& values);
// One value prints as an int ("3"), several as a tuple: how a layer shows an argument given
// either way (MaxPool2d's kernel_size=3 versus kernel_size=(3, 3)).
std::string py_int_or_tuple(const std::vector<int64_t>& values);

}  // namespace ferry::nn::repr
