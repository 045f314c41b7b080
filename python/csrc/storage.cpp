// SPDX-License-Identifier: MIT
/*
 * storage.cpp - rbln storages on librbln, and the device guard
 *
 * The allocator hands out librbln tensors of bytes: lazy, as librbln's
 * tensors are, so a tensor made and filled from the host costs no device
 * memory until the NPU first reads it. The device guard is librbln's
 * per-thread current device, so torch.rbln.set_device() and
 * rbln_set_device() are one setting.
 */

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "rbln_torch.h"

namespace rbln_torch {

void fail(const char *what)
{
	TORCH_CHECK(false, what, ": ", rbln_last_error());
}

bool to_rbln_dtype(at::ScalarType type, rbln_dtype *out)
{
	switch (type) {
	case at::kFloat: *out = RBLN_F32; return true;
	case at::kHalf: *out = RBLN_F16; return true;
	case at::kBFloat16: *out = RBLN_BF16; return true;
	case at::kInt: *out = RBLN_I32; return true;
	case at::kChar: *out = RBLN_I8; return true;
	default: return false;
	}
}

static void free_storage(void *ctx)
{
	rbln_tensor_free(static_cast<rbln_tensor *>(ctx));
}

static c10::Device device_of(rbln_tensor *t)
{
	return c10::Device(c10::DeviceType::PrivateUse1,
			   static_cast<c10::DeviceIndex>(rbln_tensor_device(t)));
}

namespace {

struct RblnAllocator final : c10::Allocator {
	c10::DataPtr allocate(size_t nbytes) override
	{
		int device = rbln_current_device();
		int64_t shape[1] = { static_cast<int64_t>(nbytes) };
		rbln_tensor *t;

		if (device < 0)
			fail("rbln: no current device");
		t = rbln_tensor_empty(shape, 1, RBLN_I8, device);
		if (!t)
			fail("rbln: allocation");
		return { t, t, &free_storage, device_of(t) };
	}

	c10::DeleterFnPtr raw_deleter() const override
	{
		return nullptr;
	}

	/* Storage clones: device to device, through librbln. */
	void copy_data(void *dest, const void *src, std::size_t count) const override
	{
		auto *d = static_cast<rbln_tensor *>(dest);
		auto *s = static_cast<rbln_tensor *>(const_cast<void *>(src));
		int64_t shape[1] = { static_cast<int64_t>(count) };
		rbln_tensor *dv, *sv;
		rbln_status st;

		if (!count)
			return;
		dv = rbln_tensor_view(d, shape, 1, RBLN_I8);
		sv = dv ? rbln_tensor_view(s, shape, 1, RBLN_I8) : nullptr;
		st = sv ? rbln_copy(dv, sv) : RBLN_ERROR_INVALID;
		rbln_tensor_free(sv);
		rbln_tensor_free(dv);
		if (st)
			fail("rbln: storage copy");
	}
};

RblnAllocator the_allocator;

} // namespace

c10::Allocator *allocator()
{
	return &the_allocator;
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &the_allocator);

at::Tensor wrap(rbln_tensor *t, at::ScalarType type)
{
	c10::SmallVector<int64_t, RBLN_MAX_DIMS> sizes(rbln_tensor_ndim(t));
	size_t nbytes = rbln_tensor_nbytes(t);

	for (size_t i = 0; i < sizes.size(); i++)
		sizes[i] = rbln_tensor_dim(t, static_cast<int>(i));
	c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes,
			     c10::DataPtr(t, t, &free_storage, device_of(t)), &the_allocator,
			     /*resizable=*/false);
	auto out = at::detail::make_tensor<c10::TensorImpl>(
		std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
		c10::scalarTypeToTypeMeta(type));
	out.unsafeGetTensorImpl()->set_sizes_contiguous(sizes);
	return out;
}

Operand::Operand(const at::Tensor &tensor)
{
	rbln_tensor *base = storage_tensor(tensor);
	at::IntArrayRef sizes = tensor.sizes();
	rbln_dtype dtype;
	bool same;

	if (!base || !tensor.is_privateuseone() || !to_rbln_dtype(tensor.scalar_type(), &dtype) ||
	    !tensor.is_contiguous() || tensor.storage_offset() != 0 ||
	    static_cast<size_t>(tensor.nbytes()) != rbln_tensor_nbytes(base))
		return;
	same = rbln_tensor_dtype(base) == dtype &&
	       rbln_tensor_ndim(base) == static_cast<int>(sizes.size());
	for (size_t i = 0; same && i < sizes.size(); i++)
		same = rbln_tensor_dim(base, static_cast<int>(i)) == sizes[i];
	if (same) {
		t_ = base;
		return;
	}
	/* A logical device's view must keep the first dimension: then it falls back. */
	t_ = rbln_tensor_view(base, sizes.data(), static_cast<int>(sizes.size()), dtype);
	owned_ = t_ != nullptr;
}

Operand::~Operand()
{
	if (owned_)
		rbln_tensor_free(t_);
}

namespace {

struct RblnGuardImpl final : c10::impl::DeviceGuardImplInterface {
	static constexpr c10::DeviceType kind = c10::DeviceType::PrivateUse1;

	c10::DeviceType type() const override
	{
		return kind;
	}

	c10::Device exchangeDevice(c10::Device d) const override
	{
		c10::Device old = getDevice();

		if (old.index() != d.index())
			setDevice(d);
		return old;
	}

	c10::Device getDevice() const override
	{
		int cur = rbln_current_device();

		return c10::Device(kind, static_cast<c10::DeviceIndex>(cur < 0 ? 0 : cur));
	}

	void setDevice(c10::Device d) const override
	{
		TORCH_CHECK(d.type() == kind, "rbln: not an rbln device: ", d);
		if (rbln_set_device(d.index()))
			fail("rbln: set_device");
	}

	void uncheckedSetDevice(c10::Device d) const noexcept override
	{
		rbln_set_device(d.index());
	}

	c10::Stream getStream(c10::Device d) const noexcept override
	{
		return c10::Stream(c10::Stream::DEFAULT, d);
	}

	c10::Stream exchangeStream(c10::Stream s) const noexcept override
	{
		return s;
	}

	c10::DeviceIndex deviceCount() const noexcept override
	{
		int n = rbln_device_count();

		return static_cast<c10::DeviceIndex>(n < 0 ? 0 : n);
	}

	void synchronizeDevice(const c10::DeviceIndex index) const override
	{
		if (rbln_synchronize(index))
			fail("rbln: synchronize");
	}
};

} // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, RblnGuardImpl);

namespace {

/*
 * What torch asks of a device beyond its guard. Host memory for
 * non_blocking copies to the CPU is plain host memory: librbln stages
 * every transfer through its own pinned buffers.
 */
struct RblnHooks final : at::PrivateUse1HooksInterface {
	bool hasPrimaryContext(c10::DeviceIndex index) const override
	{
		return index >= 0 && index < rbln_device_count();
	}

	c10::Allocator *getPinnedMemoryAllocator() const override
	{
		return c10::GetCPUAllocator();
	}

	bool isPinnedPtr(const void *data) const override
	{
		return false;
	}

	c10::DeviceIndex deviceCount() const override
	{
		int n = rbln_device_count();

		return static_cast<c10::DeviceIndex>(n < 0 ? 0 : n);
	}

	c10::DeviceIndex getCurrentDevice() const override
	{
		int cur = rbln_current_device();

		return static_cast<c10::DeviceIndex>(cur < 0 ? 0 : cur);
	}

	void setCurrentDevice(c10::DeviceIndex index) const override
	{
		if (rbln_set_device(index))
			fail("rbln: set_device");
	}
};

RblnHooks the_hooks;

/* At load, as the registrations above are. */
const bool hooks_registered = [] {
	at::RegisterPrivateUse1HooksInterface(&the_hooks);
	return true;
}();

} // namespace

} // namespace rbln_torch
