// Tensor::str() and operator<<: PyTorch's Python repr, rule for rule (torch/_tensor_str.py with
// its default print options: precision 4, threshold 1000 elements, 3 edge items, 80 columns).
// Elements are read through the strides (any view prints), with the lazy conj/neg bits
// applied; device tensors are copied to the CPU first.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "ferry/core/scalar.h"
#include "ferry/core/tensor.h"

namespace ferry {
namespace {

constexpr int kPrecision = 4;
constexpr int64_t kThreshold = 1000;  // more elements than this are summarized
constexpr int64_t kEdgeItems = 3;     // shown at each end of a summarized dimension
constexpr int kLineWidth = 80;

// A strided walk over host elements, without allocating: select() drops the first dimension.
struct View {
  const char* data;
  ScalarType dtype;
  int64_t itemsize;
  const int64_t* sizes;
  const int64_t* strides;
  int64_t dim;
  bool conj;
  bool neg;

  int64_t size0() const { return sizes[0]; }
  View select(int64_t i) const {
    View v = *this;
    v.data += i * strides[0] * itemsize;
    ++v.sizes;
    ++v.strides;
    --v.dim;
    return v;
  }
  // The element of a 0-d view, as PyTorch's item() would give it after resolve_conj/resolve_neg.
  Scalar value() const {
    Scalar s = Scalar::from_element(data, dtype);
    switch (s.kind()) {
      case Scalar::Kind::Complex: {
        auto c = s.to<std::complex<double>>();
        if (conj) c = std::conj(c);
        return Scalar(neg ? -c : c);
      }
      case Scalar::Kind::Double:
        return neg ? Scalar(-s.to<double>()) : s;
      case Scalar::Kind::Int:
        return neg ? Scalar(-s.to<int64_t>()) : s;
      case Scalar::Kind::Bool:
        return s;
    }
    return s;
  }
};

// Calls fn on every element get_summarized_data() would keep.
template <typename Fn>
void for_each_summarized(const View& v, bool summarize, Fn&& fn) {
  if (v.dim == 0) {
    fn(v.value());
    return;
  }
  const int64_t n = v.size0();
  const bool cut = summarize && n > 2 * kEdgeItems;
  for (int64_t i = 0; i < n; ++i) {
    if (cut && i == kEdgeItems) i = n - kEdgeItems;
    for_each_summarized(v.select(i), summarize, fn);
  }
}

std::string format_float(double v, char conversion, int precision) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char fmt[8] = {'%', '.', '*', conversion, '\0'};
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, precision, v);
  return buf;
}

// PyTorch's _Formatter: one width for all elements, and the notation chosen from the finite
// nonzero values (integer-valued floats print as "1.", wide ranges in scientific notation).
class Formatter {
 public:
  static Formatter for_floats(const std::vector<double>& values) {
    Formatter f;
    f.floating_ = true;
    std::vector<double> nonzero;
    for (double v : values) {
      if (std::isfinite(v) && v != 0) nonzero.push_back(v);
    }
    if (nonzero.empty()) return f;
    double lo = std::fabs(nonzero[0]), hi = lo;
    for (double v : nonzero) {
      lo = std::min(lo, std::fabs(v));
      hi = std::max(hi, std::fabs(v));
      if (v != std::ceil(v)) f.int_mode_ = false;
    }
    const bool wide = hi / lo > 1000.0 || hi > 1.0e8;
    f.sci_mode_ = f.int_mode_ ? wide : wide || lo < 1.0e-4;
    for (double v : nonzero) {
      const size_t len = f.sci_mode_   ? format_float(v, 'e', kPrecision).size()
                         : f.int_mode_ ? format_float(v, 'f', 0).size() + 1
                                       : format_float(v, 'f', kPrecision).size();
      f.width_ = std::max(f.width_, len);
    }
    return f;
  }
  static Formatter for_text(const std::vector<std::string>& values) {
    Formatter f;
    for (const auto& s : values) f.width_ = std::max(f.width_, s.size());
    return f;
  }

  size_t width() const { return width_; }

  std::string format(double v) const {
    std::string s;
    if (sci_mode_) {
      s = format_float(v, 'e', kPrecision);
    } else if (int_mode_) {
      s = format_float(v, 'f', 0);
      if (std::isfinite(v)) s += '.';
    } else {
      s = format_float(v, 'f', kPrecision);
    }
    return pad(std::move(s));
  }
  std::string pad(std::string s) const {
    return s.size() < width_ ? std::string(width_ - s.size(), ' ') + s : s;
  }

 private:
  bool floating_ = false;
  bool int_mode_ = true;
  bool sci_mode_ = false;
  size_t width_ = 1;
};

std::string text_of(const Scalar& s) {
  if (s.is_bool()) return s.to<bool>() ? "True" : "False";
  return std::to_string(s.to<int64_t>());
}

// Formats elements of one kind of tensor: floating (one formatter), complex (one for the real
// parts and one for the imaginary parts) or integral/bool (text).
class ElementPrinter {
 public:
  ElementPrinter(const View& v, bool summarize) {
    if (is_complex(v.dtype)) {
      kind_ = Kind::Complex;
      std::vector<double> re, im;
      for_each_summarized(v, summarize, [&](const Scalar& s) {
        const auto c = s.to<std::complex<double>>();
        re.push_back(c.real());
        im.push_back(c.imag());
      });
      real_ = Formatter::for_floats(re);
      imag_ = Formatter::for_floats(im);
    } else if (is_floating_point(v.dtype)) {
      kind_ = Kind::Floating;
      std::vector<double> values;
      for_each_summarized(v, summarize, [&](const Scalar& s) { values.push_back(s.to<double>()); });
      real_ = Formatter::for_floats(values);
    } else {
      std::vector<std::string> values;
      for_each_summarized(v, summarize, [&](const Scalar& s) { values.push_back(text_of(s)); });
      real_ = Formatter::for_text(values);
    }
  }

  // Characters one element takes in a row, separator included.
  size_t element_length() const {
    return real_.width() + 2 + (kind_ == Kind::Complex ? imag_.width() + 1 : 0);
  }

  std::string format(const Scalar& s) const {
    switch (kind_) {
      case Kind::Floating:
        return real_.format(s.to<double>());
      case Kind::Text:
        return real_.pad(text_of(s));
      case Kind::Complex: {
        const auto c = s.to<std::complex<double>>();
        std::string re = real_.format(c.real());
        std::string im = imag_.format(c.imag()) + "j";
        im.erase(0, im.find_first_not_of(' '));
        return im[0] == '+' || im[0] == '-' ? re + im : re + "+" + im;
      }
    }
    return {};
  }

 private:
  enum class Kind { Floating, Complex, Text };
  Kind kind_ = Kind::Text;
  Formatter real_;
  Formatter imag_;
};

std::string vector_str(const View& v, int64_t indent, bool summarize, const ElementPrinter& p) {
  const int64_t per_line =
      std::max<int64_t>(1, (kLineWidth - indent) / static_cast<int64_t>(p.element_length()));
  std::vector<std::string> data;
  const int64_t n = v.size0();
  const bool cut = summarize && n > 2 * kEdgeItems;
  for (int64_t i = 0; i < n; ++i) {
    if (cut && i == kEdgeItems) {
      data.push_back(" ...");
      i = n - kEdgeItems;
    }
    data.push_back(p.format(v.select(i).value()));
  }
  std::string out = "[";
  for (size_t i = 0; i < data.size(); ++i) {
    if (i > 0) {
      out += i % per_line == 0 ? ",\n" + std::string(indent + 1, ' ') : ", ";
    }
    out += data[i];
  }
  return out + "]";
}

std::string tensor_str(const View& v, int64_t indent, bool summarize, const ElementPrinter& p) {
  if (v.dim == 0) return p.format(v.value());
  if (v.dim == 1) return vector_str(v, indent, summarize, p);
  std::vector<std::string> slices;
  const int64_t n = v.size0();
  const bool cut = summarize && n > 2 * kEdgeItems;
  for (int64_t i = 0; i < n; ++i) {
    if (cut && i == kEdgeItems) {
      slices.push_back("...");
      i = n - kEdgeItems;
    }
    slices.push_back(tensor_str(v.select(i), indent + 1, summarize, p));
  }
  const std::string sep = "," + std::string(v.dim - 1, '\n') + std::string(indent + 1, ' ');
  std::string out = "[";
  for (size_t i = 0; i < slices.size(); ++i) out += (i ? sep : "") + slices[i];
  return out + "]";
}

// PyTorch's _add_suffixes: ", suffix" on the same line while it fits in 80 columns.
std::string add_suffixes(std::string text, const std::vector<std::string>& suffixes,
                         int64_t indent) {
  const size_t newline = text.rfind('\n');
  // As PyTorch computes it (rfind's -1 makes a one-line string count two extra columns).
  int64_t last_line_len = static_cast<int64_t>(text.size()) -
                          (newline == std::string::npos ? -1 : static_cast<int64_t>(newline)) + 1;
  for (const auto& suffix : suffixes) {
    const auto len = static_cast<int64_t>(suffix.size());
    if (last_line_len + len + 2 > kLineWidth) {
      text += ",\n" + std::string(indent, ' ') + suffix;
      last_line_len = indent + len;
    } else {
      text += ", " + suffix;
      last_line_len += len + 2;
    }
  }
  return text + ")";
}

// The dtypes PyTorch leaves unprinted because they are what the values would infer.
bool is_default_dtype(ScalarType t) {
  return t == kFloat32 || t == kComplex64 || t == kInt64 || t == kBool;
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  const std::string prefix = "tensor(";
  const auto indent = static_cast<int64_t>(prefix.size());
  std::vector<std::string> suffixes;
  if (!is_cpu()) suffixes.push_back("device='" + device().str() + "'");

  std::string body;
  if (numel() == 0) {
    if (dim() != 1) {  // (0,) goes without saying
      std::string size = "size=(";
      for (int64_t d = 0; d < dim(); ++d) size += (d ? ", " : "") + std::to_string(sizes()[d]);
      suffixes.push_back(size + ")");
    }
    if (dtype() != kFloat32) suffixes.push_back("dtype=ferry." + std::string(dtype_name(dtype())));
    body = "[]";
  } else {
    if (!is_default_dtype(dtype())) {
      suffixes.push_back("dtype=ferry." + std::string(dtype_name(dtype())));
    }
    const Tensor host = is_cpu() ? *this : cpu();
    const View v{static_cast<const char*>(host.const_data_ptr()),
                 host.dtype(),
                 static_cast<int64_t>(host.element_size()),
                 host.sizes().data(),
                 host.strides().data(),
                 host.dim(),
                 host.is_conj(),
                 host.is_neg()};
    const bool summarize = host.numel() > kThreshold;
    const ElementPrinter printer(v, summarize);
    body = tensor_str(v, indent, summarize, printer);
  }
  if (requires_grad()) suffixes.push_back("requires_grad=True");
  return add_suffixes(prefix + body, suffixes, indent);
}

std::ostream& operator<<(std::ostream& out, const Tensor& t) { return out << t.str(); }

}  // namespace ferry
