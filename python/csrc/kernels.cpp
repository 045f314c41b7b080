// SPDX-License-Identifier: MIT
/*
 * kernels.cpp - the rbln device's ATen kernels: librbln's ops
 *
 * Each kernel runs its op on the NPU through librbln's dispatch (program
 * cache, recompiles, warm hits) when librbln can: operands contiguous, in
 * an ISA dtype, of the shapes the op takes, and a result of the dtype
 * torch's promotion gives. Anything else goes to the CPU fallback, which
 * is slower but never wrong.
 */

#include <ATen/NativeFunctions.h>
#include <ATen/Operators.h>
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include "rbln_torch.h"

namespace rbln_torch {
namespace {

using binary_fn = rbln_tensor *(*)(rbln_tensor *, rbln_tensor *);
using scalar_fn = rbln_tensor *(*)(rbln_tensor *, double);
using unary_fn = rbln_tensor *(*)(rbln_tensor *);

/* A librbln result as a torch tensor; NULL from librbln throws its message. */
at::Tensor result(rbln_tensor *t, at::ScalarType type, const char *op)
{
	if (!t)
		fail(op);
	return wrap(t, type);
}

bool isa_dtype(at::ScalarType type)
{
	rbln_dtype d;

	return to_rbln_dtype(type, &d);
}

/*
 * Whether @value is one of @type's: the ISA saturates a scalar into an
 * integer dtype where torch wraps it (int8 + 200 adds -56 in torch).
 */
bool fits(at::ScalarType type, double value)
{
	if (type == at::kInt)
		return value >= INT32_MIN && value <= INT32_MAX;
	if (type == at::kChar)
		return value >= INT8_MIN && value <= INT8_MAX;
	return true;
}

/*
 * A Python number (torch wraps it in a 0-d CPU tensor of double, int64 or
 * bool) that fits @type, read in place: item() would be a dispatch.
 */
bool scalar_operand(const at::Tensor &t, at::ScalarType type, double *value)
{
	if (t.dim() != 0 || !t.is_cpu() || !t.unsafeGetTensorImpl()->is_wrapped_number())
		return false;
	switch (t.scalar_type()) {
	case at::kDouble:
		*value = *t.const_data_ptr<double>();
		break;
	case at::kLong:
		*value = static_cast<double>(*t.const_data_ptr<int64_t>());
		break;
	case at::kBool:
		*value = *t.const_data_ptr<bool>();
		break;
	default:
		return false;
	}
	return fits(type, *value);
}

/* torch's result dtype; one dtype's, without a dispatch, when both have it. */
at::ScalarType result_dtype(const at::Tensor &self, const at::Tensor &other)
{
	if (self.scalar_type() == other.scalar_type())
		return self.scalar_type();
	return at::result_type(self, other);
}

#define FALLBACK(op, ...) \
	at::native::call_fallback_fn<&cpu_fallback, ATEN_OP(op)>::call(__VA_ARGS__)

/*
 * self OP other on the NPU: same shape and dtype, or other a Python
 * number (ISA scalar form), and torch's result dtype self's.
 */
at::Tensor binary(const at::Tensor &self, const at::Tensor &other, binary_fn fn, scalar_fn sfn,
		  const char *name, bool *done)
{
	at::ScalarType out = result_dtype(self, other);
	double s;

	*done = false;
	if (out != self.scalar_type() || !isa_dtype(out))
		return {};
	if (scalar_operand(other, out, &s) && sfn) {
		Operand a(self);

		if (!a)
			return {};
		Attribution attr(nullptr);
		*done = true;
		return result(sfn(a.get(), s), out, name);
	}
	if (other.scalar_type() != out || !other.is_privateuseone() ||
	    self.sizes() != other.sizes() || self.device() != other.device())
		return {};
	Operand a(self), b(other);
	if (!a || !b)
		return {};
	Attribution attr(nullptr);
	*done = true;
	return result(fn(a.get(), b.get()), out, name);
}

/* Integer true division gives floats: the ISA's div is not that. */
bool float_type(at::ScalarType t)
{
	return at::isFloatingType(t);
}

at::Tensor add(const at::Tensor &self, const at::Tensor &other, const at::Scalar &alpha)
{
	bool done = false;
	at::Tensor r;

	if (alpha.equal(1))
		r = binary(self, other, rbln_add, rbln_add_scalar, "rbln: add", &done);
	return done ? r : FALLBACK(add_Tensor, self, other, alpha);
}

at::Tensor sub(const at::Tensor &self, const at::Tensor &other, const at::Scalar &alpha)
{
	bool done = false;
	at::Tensor r;

	if (alpha.equal(1))
		r = binary(self, other, rbln_sub, rbln_sub_scalar, "rbln: sub", &done);
	return done ? r : FALLBACK(sub_Tensor, self, other, alpha);
}

at::Tensor mul(const at::Tensor &self, const at::Tensor &other)
{
	bool done;
	at::Tensor r = binary(self, other, rbln_mul, rbln_mul_scalar, "rbln: mul", &done);

	return done ? r : FALLBACK(mul_Tensor, self, other);
}

at::Tensor div(const at::Tensor &self, const at::Tensor &other)
{
	bool done = false;
	at::Tensor r;

	if (float_type(self.scalar_type()))
		r = binary(self, other, rbln_div, rbln_div_scalar, "rbln: div", &done);
	return done ? r : FALLBACK(div_Tensor, self, other);
}

/*
 * In place: the op's result copied into self, both on the NPU. Only where
 * torch's result dtype is self's (else torch's own checks must refuse it,
 * on the CPU fallback) and self is all of its storage.
 */
bool in_place_ok(const at::Tensor &self, const at::Tensor &other)
{
	Operand s(self);

	return s && result_dtype(self, other) == self.scalar_type();
}

at::Tensor &add_(at::Tensor &self, const at::Tensor &other, const at::Scalar &alpha)
{
	if (!in_place_ok(self, other))
		return FALLBACK(add__Tensor, self, other, alpha);
	return self.copy_(rbln_torch::add(self, other, alpha));
}

at::Tensor &sub_(at::Tensor &self, const at::Tensor &other, const at::Scalar &alpha)
{
	if (!in_place_ok(self, other))
		return FALLBACK(sub__Tensor, self, other, alpha);
	return self.copy_(rbln_torch::sub(self, other, alpha));
}

at::Tensor &mul_(at::Tensor &self, const at::Tensor &other)
{
	if (!in_place_ok(self, other))
		return FALLBACK(mul__Tensor, self, other);
	return self.copy_(rbln_torch::mul(self, other));
}

at::Tensor &div_(at::Tensor &self, const at::Tensor &other)
{
	/* True division of integers gives floats, which torch refuses to put back. */
	if (!float_type(self.scalar_type()) || !in_place_ok(self, other))
		return FALLBACK(div__Tensor, self, other);
	return self.copy_(rbln_torch::div(self, other));
}

at::Tensor maximum(const at::Tensor &self, const at::Tensor &other)
{
	bool done;
	at::Tensor r = binary(self, other, rbln_maximum, nullptr, "rbln: maximum", &done);

	return done ? r : FALLBACK(maximum, self, other);
}

at::Tensor minimum(const at::Tensor &self, const at::Tensor &other)
{
	bool done;
	at::Tensor r = binary(self, other, rbln_minimum, nullptr, "rbln: minimum", &done);

	return done ? r : FALLBACK(minimum, self, other);
}

at::Tensor unary(const at::Tensor &self, unary_fn fn, const char *name, bool *done)
{
	Operand a(self);

	*done = false;
	if (!a)
		return {};
	Attribution attr(nullptr);
	*done = true;
	return result(fn(a.get()), self.scalar_type(), name);
}

at::Tensor neg(const at::Tensor &self)
{
	bool done;
	at::Tensor r = unary(self, rbln_neg, "rbln: neg", &done);

	return done ? r : FALLBACK(neg, self);
}

at::Tensor abs(const at::Tensor &self)
{
	bool done;
	at::Tensor r = unary(self, rbln_abs, "rbln: abs", &done);

	return done ? r : FALLBACK(abs, self);
}

at::Tensor relu(const at::Tensor &self)
{
	bool done;
	at::Tensor r = unary(self, rbln_relu, "rbln: relu", &done);

	return done ? r : FALLBACK(relu, self);
}

at::Tensor &relu_(at::Tensor &self)
{
	Operand s(self);

	if (!s)
		return FALLBACK(relu_, self);
	return self.copy_(rbln_torch::relu(self));
}

at::Tensor clone(const at::Tensor &self, std::optional<at::MemoryFormat> format)
{
	bool done = false;
	at::Tensor r;

	if (!format || *format == at::MemoryFormat::Contiguous ||
	    *format == at::MemoryFormat::Preserve)
		r = unary(self, rbln_clone, "rbln: clone", &done);
	return done ? r : FALLBACK(clone, self, format);
}

/* Over the last dimension only, in the input's dtype, as the ISA reduces. */
bool last_dim_only(const at::Tensor &self, at::OptionalIntArrayRef dim, bool keepdim,
		   std::optional<at::ScalarType> dtype)
{
	if (keepdim || self.dim() == 0 || !dim || dim->size() != 1)
		return false;
	if (dtype && *dtype != self.scalar_type())
		return false;
	return c10::maybe_wrap_dim((*dim)[0], self.dim()) == self.dim() - 1;
}

at::Tensor sum(const at::Tensor &self, at::OptionalIntArrayRef dim, bool keepdim,
	       std::optional<at::ScalarType> dtype)
{
	bool done = false;
	at::Tensor r;

	/* torch sums integers into int64, which the ISA has not. */
	if (float_type(self.scalar_type()) && last_dim_only(self, dim, keepdim, dtype))
		r = unary(self, rbln_sum, "rbln: sum", &done);
	return done ? r : FALLBACK(sum_dim_IntList, self, dim, keepdim, dtype);
}

at::Tensor amax(const at::Tensor &self, at::IntArrayRef dim, bool keepdim)
{
	bool done = false;
	at::Tensor r;

	if (last_dim_only(self, dim, keepdim, std::nullopt))
		r = unary(self, rbln_amax, "rbln: amax", &done);
	return done ? r : FALLBACK(amax, self, dim, keepdim);
}

at::Tensor matmul_like(const at::Tensor &self, const at::Tensor &other, bool *done)
{
	*done = false;
	if (self.scalar_type() != other.scalar_type() || !isa_dtype(self.scalar_type()) ||
	    self.device() != other.device())
		return {};
	Operand a(self), b(other);
	if (!a || !b)
		return {};
	Attribution attr(nullptr);
	*done = true;
	return result(rbln_matmul(a.get(), b.get()), self.scalar_type(), "rbln: matmul");
}

at::Tensor mm(const at::Tensor &self, const at::Tensor &other)
{
	bool done;
	at::Tensor r = matmul_like(self, other, &done);

	return done ? r : FALLBACK(mm, self, other);
}

at::Tensor bmm(const at::Tensor &self, const at::Tensor &other)
{
	bool done;
	at::Tensor r = matmul_like(self, other, &done);

	return done ? r : FALLBACK(bmm, self, other);
}

/*
 * The librbln tensor of @t's storage when @t is all of it, contiguous:
 * its bytes are @t's, so copies to and from the host need no view (which
 * would move a lazy storage to the device). NULL otherwise.
 */
rbln_tensor *whole_storage(const at::Tensor &t)
{
	rbln_tensor *base = storage_tensor(t);

	if (!base || !t.is_contiguous() || t.storage_offset() != 0 ||
	    static_cast<size_t>(t.nbytes()) != rbln_tensor_nbytes(base))
		return nullptr;
	return base;
}

at::Tensor &fill(at::Tensor &self, const at::Scalar &value)
{
	/* A new tensor stays in host memory until the NPU needs it (the seed's lazy allocation). */
	rbln_tensor *base = whole_storage(self);

	if (base && !rbln_tensor_is_materialized(base)) {
		/* By chunks: an offloaded tensor may be bigger than host memory. */
		int64_t n = std::min<int64_t>(self.numel(), (4 << 20) / self.element_size());
		at::Tensor host = at::full({ n }, value, self.options().device(at::kCPU));
		size_t total = self.nbytes(), step = host.nbytes();

		for (size_t off = 0; off < total; off += step)
			if (rbln_tensor_write(base, off, host.data_ptr(), std::min(step, total - off)))
				fail("rbln: fill_");
		return self;
	}
	Operand a(self);

	if (!a || !isa_dtype(self.scalar_type()) || !fits(self.scalar_type(), value.toDouble()))
		return FALLBACK(fill__Scalar, self, value);
	Attribution attr(nullptr);
	if (rbln_fill(a.get(), value.toDouble()))
		fail("rbln: fill_");
	return self;
}

at::Tensor &zero(at::Tensor &self)
{
	return fill(self, 0);
}

/*
 * A contiguous tensor of an ISA dtype is a librbln tensor of its shape:
 * ops take it as it is, and on a logical device it is sharded by its
 * rows, as librbln's own tensors are. Anything else is bytes from the
 * allocator (librbln's too).
 */
at::Tensor typed_empty(at::IntArrayRef size, at::ScalarType type, bool *done)
{
	rbln_dtype dt;
	rbln_tensor *t;

	*done = false;
	if (size.size() > RBLN_MAX_DIMS || !to_rbln_dtype(type, &dt))
		return {};
	t = rbln_tensor_empty(size.data(), static_cast<int>(size.size()), dt,
			      rbln_current_device());
	if (!t)
		fail("rbln: empty");
	*done = true;
	return wrap(t, type);
}

at::Tensor empty(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
		 std::optional<at::Layout> layout, std::optional<at::Device> device,
		 std::optional<bool> pin_memory, std::optional<at::MemoryFormat> format)
{
	c10::DeviceGuard guard(device.value_or(at::Device(c10::DeviceType::PrivateUse1)));
	at::ScalarType type = c10::dtype_or_default(dtype);
	bool done = false;
	at::Tensor t;

	if (!format || *format == at::MemoryFormat::Contiguous)
		t = typed_empty(size, type, &done);
	if (done)
		return t;
	return at::detail::empty_generic(size, allocator(),
					 c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), type,
					 format);
}

/* librbln's zeros: lazy, and free of host writes when offloaded. */
at::Tensor zeros(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
		 std::optional<at::Layout> layout, std::optional<at::Device> device,
		 std::optional<bool> pin_memory)
{
	c10::DeviceGuard guard(device.value_or(at::Device(c10::DeviceType::PrivateUse1)));
	at::ScalarType type = c10::dtype_or_default(dtype);
	rbln_dtype dt;
	rbln_tensor *t;

	if (size.size() > RBLN_MAX_DIMS || !to_rbln_dtype(type, &dt))
		return empty(size, type, layout, device, pin_memory, std::nullopt).zero_();
	t = rbln_tensor_zeros(size.data(), static_cast<int>(size.size()), dt,
			      rbln_current_device());
	if (!t)
		fail("rbln: zeros");
	return wrap(t, type);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride,
			 std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
			 std::optional<at::Device> device, std::optional<bool> pin_memory)
{
	c10::DeviceGuard guard(device.value_or(at::Device(c10::DeviceType::PrivateUse1)));
	at::ScalarType type = c10::dtype_or_default(dtype);
	bool done = false;
	at::Tensor t;

	if (stride == c10::contiguous_strides(size))
		t = typed_empty(size, type, &done);
	if (done)
		return t;
	return at::detail::empty_strided_generic(size, stride, allocator(),
						 c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
						 type);
}

const at::Tensor &resize(const at::Tensor &self, c10::SymIntArrayRef size,
			 std::optional<at::MemoryFormat> format)
{
	TORCH_CHECK(!format || *format == at::MemoryFormat::Contiguous,
		    "rbln: resize_ keeps tensors contiguous");
	std::vector<int64_t> sizes;

	for (const auto &s : size)
		sizes.push_back(s.expect_int());
	int64_t need = c10::multiply_integers(sizes) * self.element_size() +
		       self.storage_offset() * self.element_size();
	if (need > static_cast<int64_t>(self.storage().nbytes())) {
		/* A new storage, the old bytes copied: librbln tensors do not grow. */
		at::Tensor fresh = empty({ need / self.element_size() }, self.scalar_type(),
					 std::nullopt, self.device(), std::nullopt, std::nullopt);
		at::Storage old = self.storage();

		if (old.nbytes())
			allocator()->copy_data(fresh.storage().mutable_data(), old.data(),
					       old.nbytes());
		self.unsafeGetTensorImpl()->set_storage_keep_dtype(fresh.storage());
	}
	self.unsafeGetTensorImpl()->set_sizes_contiguous(sizes);
	return self;
}

/* The whole storage of rbln tensor @t on the host, and @t as a CPU view of it. */
at::Tensor storage_on_host(const at::Tensor &t)
{
	rbln_tensor *base = storage_tensor(t);
	at::Tensor bytes = at::empty({ static_cast<int64_t>(t.storage().nbytes()) },
				     at::TensorOptions().dtype(at::kByte));

	if (base && bytes.numel() && rbln_tensor_read(base, bytes.data_ptr(), bytes.numel()))
		fail("rbln: copy to the host");
	return at::empty({ 0 }, bytes.options().dtype(t.scalar_type()))
		.set_(bytes.storage(), t.storage_offset(), t.sizes(), t.strides());
}

/* @host's bytes, the whole storage of rbln tensor @t, written back. */
void storage_from_host(const at::Tensor &t, const at::Tensor &host)
{
	rbln_tensor *base = storage_tensor(t);
	size_t n = t.storage().nbytes();

	if (base && n && rbln_tensor_write(base, 0, host.storage().data(), n))
		fail("rbln: copy from the host");
}

/*
 * Whether the ISA converts @from to @to as torch does: to floats (round to
 * nearest even), and widening integers. Not to narrower integers (the ISA
 * saturates where torch wraps) nor floats to integers (the ISA rounds
 * where torch truncates).
 */
bool isa_converts(at::ScalarType from, at::ScalarType to)
{
	if (!isa_dtype(from) || !isa_dtype(to))
		return false;
	if (at::isFloatingType(to) || from == to)
		return true;
	return !at::isFloatingType(from) && c10::elementSize(to) >= c10::elementSize(from);
}

/*
 * A fallback's result written to @dst (@bytes of it): a bounce when it
 * lands in device memory, where it goes at once when the fallback's
 * inputs came from there, as librbln's CPU ops do.
 */
void fallback_wrote(const at::Tensor &dst, size_t bytes)
{
	rbln_tensor *base = storage_tensor(dst);

	if (!fallback_now || !base)
		return;
	if (!rbln_tensor_is_materialized(base)) {
		if (!fallback_now->from_device)
			return;
		if (rbln_tensor_materialize(base))
			fail("rbln: a fallback's result to the device");
	}
	rbln_explain_record_bounce(fallback_now->op.c_str(), false, bytes);
}

/* A fallback read @src (@bytes of it): a bounce when it came from device memory. */
void fallback_read(const at::Tensor &src, size_t bytes)
{
	rbln_tensor *base = storage_tensor(src);

	if (!fallback_now || !base || !rbln_tensor_is_materialized(base))
		return;
	fallback_now->from_device = true;
	rbln_explain_record_bounce(fallback_now->op.c_str(), true, bytes);
}

/* Host to device: into the host copy of a lazy tensor, which stays lazy. */
void copy_from_host(const at::Tensor &src, const at::Tensor &dst)
{
	rbln_tensor *base = dst.sizes() == src.sizes() ? whole_storage(dst) : nullptr;
	bool was_there = base && rbln_tensor_is_materialized(base);

	if (!dst.numel())
		return;
	if (base) {
		at::Tensor host = src.to(dst.scalar_type()).contiguous();

		if (rbln_tensor_write(base, 0, host.data_ptr(), host.nbytes()))
			fail("rbln: copy from the host");
		if (was_there || fallback_now)
			fallback_wrote(dst, host.nbytes());
		return;
	}
	/* Into part of a storage: all of it goes through the host. */
	at::Tensor host = storage_on_host(dst);

	host.copy_(src);
	storage_from_host(dst, host);
	fallback_wrote(dst, dst.storage().nbytes());
}

void copy_to_host(const at::Tensor &src, const at::Tensor &dst, bool non_blocking)
{
	rbln_tensor *base = whole_storage(src);

	if (!src.numel())
		return;
	if (base && dst.is_contiguous() && dst.scalar_type() == src.scalar_type() &&
	    dst.sizes() == src.sizes()) {
		fallback_read(src, dst.nbytes());
		if (rbln_tensor_read(base, dst.data_ptr(), dst.nbytes()))
			fail("rbln: copy to the host");
		return;
	}
	fallback_read(src, src.storage().nbytes());
	dst.copy_(storage_on_host(src), non_blocking);
}

/* Device to device, one device, on the NPU: false when it cannot. */
bool copy_on_npu(const at::Tensor &src, const at::Tensor &dst)
{
	if (dst.sizes() != src.sizes() || src.device() != dst.device() ||
	    !isa_converts(src.scalar_type(), dst.scalar_type()))
		return false;
	Operand s(src), d(dst);
	if (!s || !d)
		return false;

	rbln_tensor *from = s.get(), *cast = nullptr;
	rbln_status st;

	if (src.scalar_type() != dst.scalar_type()) {
		rbln_dtype dt;

		to_rbln_dtype(dst.scalar_type(), &dt);
		cast = rbln_cast(from, dt);
		if (!cast)
			fail("rbln: copy_");
		from = cast;
	}
	st = rbln_copy(d.get(), from);
	rbln_tensor_free(cast);
	if (st)
		fail("rbln: copy_");
	return true;
}

at::Tensor copy_from(const at::Tensor &src, const at::Tensor &dst, bool non_blocking)
{
	if (dst.is_cpu()) {
		Attribution attr(nullptr);

		copy_to_host(src, dst, non_blocking);
	} else if (src.is_cpu()) {
		Attribution attr(nullptr);

		copy_from_host(src, dst);
	} else if (src.device() != dst.device() && src.scalar_type() == dst.scalar_type() &&
		   src.sizes() == dst.sizes() && whole_storage(src)) {
		/* To another device: librbln copies, then the copy is copied in. */
		Attribution attr(nullptr);
		Operand s(src);
		rbln_tensor *moved;

		if (!s)
			fail("rbln: copy_ between devices");
		moved = rbln_tensor_to(s.get(), dst.device().index(), false);
		if (!moved)
			fail("rbln: copy_ between devices");
		at::Tensor there = wrap(moved, src.scalar_type());

		if (!copy_on_npu(there, dst))
			copy_from_host(there.cpu(), dst);
	} else {
		bool done;

		{
			Attribution attr(nullptr);

			done = copy_on_npu(src, dst);
		}
		if (!done) {
			/* What the NPU cannot convert, or strided: torch does it on the CPU. */
			Attribution fb("aten::copy_");
			uint64_t start = now_ns();

			copy_from_host(src.to(at::kCPU).to(dst.scalar_type()), dst);
			rbln_explain_record_fallback("aten::copy_", now_ns() - start);
		}
	}
	return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor &src, const at::Tensor &dst)
{
	if (dst.sizes() != src.sizes())
		resize(dst, src.sym_sizes(), std::nullopt);
	return copy_from(src, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor &self)
{
	return at::_local_scalar_dense(self.to(at::kCPU));
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("add.Tensor", TORCH_FN(add));
	m.impl("sub.Tensor", TORCH_FN(sub));
	m.impl("mul.Tensor", TORCH_FN(mul));
	m.impl("div.Tensor", TORCH_FN(div));
	m.impl("add_.Tensor", TORCH_FN(add_));
	m.impl("sub_.Tensor", TORCH_FN(sub_));
	m.impl("mul_.Tensor", TORCH_FN(mul_));
	m.impl("div_.Tensor", TORCH_FN(div_));
	m.impl("relu_", TORCH_FN(relu_));
	m.impl("maximum", TORCH_FN(maximum));
	m.impl("minimum", TORCH_FN(minimum));
	m.impl("neg", TORCH_FN(neg));
	m.impl("abs", TORCH_FN(abs));
	m.impl("relu", TORCH_FN(relu));
	m.impl("clone", TORCH_FN(clone));
	m.impl("sum.dim_IntList", TORCH_FN(sum));
	m.impl("amax", TORCH_FN(amax));
	m.impl("mm", TORCH_FN(mm));
	m.impl("bmm", TORCH_FN(bmm));
	m.impl("fill_.Scalar", TORCH_FN(fill));
	m.impl("zero_", TORCH_FN(zero));
	m.impl("empty.memory_format", TORCH_FN(empty));
	m.impl("zeros", TORCH_FN(zeros));
	m.impl("empty_strided", TORCH_FN(empty_strided));
	/* Views and reshapes: metadata only, as on every device. */
	m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
	m.impl("resize_", TORCH_FN(resize));
	m.impl("_copy_from", TORCH_FN(copy_from));
	m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
	m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
	m.impl("view", TORCH_FN(at::native::view));
	m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m)
{
	m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
}

} // namespace rbln_torch
