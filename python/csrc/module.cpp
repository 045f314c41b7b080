// SPDX-License-Identifier: MIT
/*
 * module.cpp - the Python module _torch_rbln
 *
 * Loading it registers the rbln device's allocator, guard and kernels
 * (static registrations in the other files). torch_rbln's Python side
 * calls librbln through ctypes, loading the very library this module is
 * linked to, so that both share one librbln: one allocator, one current
 * device per thread.
 */

#include <dlfcn.h>
#include <pybind11/pybind11.h>

extern "C" {
#include <rbln/rbln.h>
}

static std::string librbln_path()
{
	Dl_info info;

	if (!dladdr(reinterpret_cast<void *>(&rbln_last_error), &info) || !info.dli_fname)
		throw std::runtime_error("torch.rbln: cannot find librbln");
	return info.dli_fname;
}

PYBIND11_MODULE(_torch_rbln, m)
{
	m.doc() = "torch.rbln's device backend on librbln";
	m.def("librbln_path", &librbln_path, "The path of the librbln this module is linked to");
}
