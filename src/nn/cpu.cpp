#include "nn/cpu.h"

#include <cstring>

#include "core/half.h"

namespace sotto::nn::cpu {

void read_floats(const Tensor& t, int64_t begin, int64_t count, float* out) {
  const uint8_t* p = t.data<uint8_t>();
  const QuantParams q = t.quant();
  switch (t.dtype()) {
    case DType::F32:
      std::memcpy(out, p + begin * 4, static_cast<size_t>(count) * 4);
      return;
    case DType::F16:
      for (int64_t i = 0; i < count; ++i) {
        uint16_t h;
        std::memcpy(&h, p + (begin + i) * 2, 2);
        out[i] = f16_to_f32(h);
      }
      return;
    case DType::BF16:
      for (int64_t i = 0; i < count; ++i) {
        uint16_t h;
        std::memcpy(&h, p + (begin + i) * 2, 2);
        out[i] = bf16_to_f32(h);
      }
      return;
    case DType::I8:
      for (int64_t i = 0; i < count; ++i)
        out[i] = static_cast<float>(static_cast<int8_t>(p[begin + i]) - q.zero_point) * q.scale;
      return;
    case DType::U8:
      for (int64_t i = 0; i < count; ++i)
        out[i] = static_cast<float>(static_cast<int32_t>(p[begin + i]) - q.zero_point) * q.scale;
      return;
    case DType::I32:
      for (int64_t i = 0; i < count; ++i) {
        int32_t v;
        std::memcpy(&v, p + (begin + i) * 4, 4);
        out[i] = static_cast<float>(v);
      }
      return;
    case DType::I64:
      for (int64_t i = 0; i < count; ++i) {
        int64_t v;
        std::memcpy(&v, p + (begin + i) * 8, 8);
        out[i] = static_cast<float>(v);
      }
      return;
    default:
      NN_ASSERT(false && "nn: tensor dtype cannot be read as floats");
      std::memset(out, 0, static_cast<size_t>(count) * 4);
  }
}

Tensor as_f32(const Tensor& t) {
  if (t.dtype() == DType::F32) return t;
  Tensor out = t.ctx().empty(t.shape());
  read_floats(t, 0, t.elements(), out.f32());
  return out;
}

Tensor weight_f32(const Tensor& w) {
  if (w.dtype() == DType::F32) return w;
  return w.derived(kDerivedF32, [&] { return as_f32(w); });
}

std::vector<int64_t> read_ints(const Tensor& t) {
  std::vector<int64_t> out(static_cast<size_t>(t.elements()));
  const uint8_t* p = t.data<uint8_t>();
  for (size_t i = 0; i < out.size(); ++i) {
    switch (t.dtype()) {
      case DType::I32: {
        int32_t v;
        std::memcpy(&v, p + i * 4, 4);
        out[i] = v;
        break;
      }
      case DType::I64:
        std::memcpy(&out[i], p + i * 8, 8);
        break;
      case DType::I8:
        out[i] = static_cast<int8_t>(p[i]);
        break;
      case DType::U8:
        out[i] = p[i];
        break;
      default:
        NN_ASSERT(false && "nn: tensor dtype is not an integer type");
        out[i] = 0;
    }
  }
  return out;
}

void strides_of(const Shape& s, int64_t* strides) {
  int64_t stride = 1;
  for (int i = s.rank - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= s.dims[i];
  }
}

AxisSplit split_at(const Shape& s, int axis) {
  const int a = axis_of(s, axis);
  AxisSplit r;
  for (int i = 0; i < a; ++i) r.outer *= s.dims[i];
  r.n = s.dims[a];
  for (int i = a + 1; i < s.rank; ++i) r.inner *= s.dims[i];
  return r;
}

}  // namespace sotto::nn::cpu
