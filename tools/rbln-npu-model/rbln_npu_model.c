// SPDX-License-Identifier: GPL-2.0-only
/*
 * rbln-npu-model - the rbln NPU as a PCI function, in a process of its own
 *
 * The NPU here is kernel/emu/, the very units rbln.ko builds in, compiled
 * over kcompat.h. This file is their home: it serves the function to one
 * vfio-user client (QEMU's vfio-user-pci) on a UNIX socket, forwards BAR0
 * accesses to the register block, reaches guest memory through the DMA
 * regions the client maps, and raises MSI-X vectors through the client's
 * eventfds. The PCI view of the device is documented in docs/pci.md.
 *
 * One process serves one or more devices, a socket and a client thread
 * each. Peer slots reach the other devices of the same process, as PCIe
 * peer-to-peer reaches the functions behind one switch; a serial of any
 * other device faults as unmapped.
 */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "../../kernel/emu/rbln_emu_internal.h"
#include "vfio_user.h"

#define MODEL_BAR0_SIZE		0x4000
#define MODEL_MSIX_TABLE	0x2000
#define MODEL_MSIX_PBA		0x3000
#define MODEL_MAX_DEVICES	64

struct npu_model {
	struct rbln_emu_dev edev;
	struct rbln_vfu *vfu;
	const char *socket;
	pthread_t thread;
	int ret;
};

/*
 * The process's devices. Set up before any client connects and freed
 * only after every device has stopped, so a peer found here stays valid
 * for as long as a command processor may use it.
 */
static struct npu_model models[MODEL_MAX_DEVICES];
static unsigned int num_models;
/* A SIGTERM or SIGINT came: devices listening later stop at once. */
static volatile sig_atomic_t stopping;

static struct npu_model *to_model(struct rbln_emu_dev *edev)
{
	return container_of(edev, struct npu_model, edev);
}

/* A function whose Bus Master Enable is off reaches no memory, as on PCI. */
void *rbln_emu_host_ptr(struct rbln_emu_dev *edev, u64 dma_addr, u32 len, bool write)
{
	struct rbln_vfu *vfu = to_model(edev)->vfu;

	if (!rbln_vfu_bus_master(vfu))
		return NULL;
	return rbln_vfu_dma_ptr(vfu, dma_addr, len, write ? RBLN_VFU_DMA_WRITE : RBLN_VFU_DMA_READ);
}

struct rbln_emu_dev *rbln_emu_get_by_serial(u64 serial)
{
	unsigned int i;

	for (i = 0; i < num_models; i++)
		if (models[i].edev.serial == serial && !READ_ONCE(models[i].edev.stopping))
			return &models[i].edev;
	return NULL;
}

void rbln_emu_put(struct rbln_emu_dev *edev)
{
	(void)edev;
}

void rbln_emu_deliver_irq(struct rbln_emu_dev *edev, unsigned int vector)
{
	rbln_vfu_irq(to_model(edev)->vfu, vector);
}

static uint32_t model_read32(void *opaque, uint32_t off)
{
	return rbln_emu_reg_read(opaque, off);
}

static void model_write32(void *opaque, uint32_t off, uint32_t val)
{
	rbln_emu_reg_write(opaque, off, val);
}

/* DEVICE_RESET and FLR: a function reset, complete when this returns. */
static void model_reset(void *opaque)
{
	rbln_emu_bus_reset(opaque);
}

static void model_quiesce(void *opaque)
{
	rbln_emu_quiesce(opaque);
}

static const struct rbln_vfu_ops model_ops = {
	.read32 = model_read32,
	.write32 = model_write32,
	.reset = model_reset,
	.quiesce = model_quiesce,
};

/*
 * SIGTERM and SIGINT: every serve() returns and the devices go as on a
 * disconnect. The client sees a surprise removal: its connection ends
 * cleanly (see rbln_vfu_stop()), and every DMA mapping is gone, the
 * command processors quiesced first, before a device is stopped and
 * before anything is freed. Allowed from the start: a device not
 * listening yet is stopped as soon as it is.
 */
static void on_signal(int sig)
{
	unsigned int i;

	(void)sig;
	stopping = 1;
	for (i = 0; i < num_models; i++) {
		struct rbln_vfu *vfu = __atomic_load_n(&models[i].vfu, __ATOMIC_ACQUIRE);

		if (vfu)
			rbln_vfu_stop(vfu);
	}
}

static void *serve_thread(void *arg)
{
	struct npu_model *model = arg;

	model->ret = rbln_vfu_serve(model->vfu);
	if (model->ret < 0)
		fprintf(stderr, "rbln-npu-model: %s: %s\n", model->socket, strerror(-model->ret));
	else if (model->ret == 1)
		fprintf(stderr, "rbln-npu-model: %s: stopped by a signal\n", model->socket);
	/* The client is gone: the function falls off its bus. */
	rbln_emu_dev_stop(&model->edev);
	return NULL;
}

static void usage(FILE *f, const char *prog)
{
	fprintf(f, "Usage: %s --socket PATH [--socket PATH]... [--index N] [--mem-mib M]\n"
		"Serve one rbln NPU as a PCI function to one vfio-user client on each PATH.\n"
		"Devices are numbered from N (default 0) in the order of their sockets.\n",
		prog);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "index", required_argument, NULL, 'i' },
		{ "mem-mib", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct rbln_vfu_config cfg = {
		.vendor = 0xfffe,
		.device = 0x0001,
		.class_code = 0x120000,
		.revision = 1,
		.bar0_size = MODEL_BAR0_SIZE,
		.msix_vectors = RBLN_EMU_NUM_RINGS + 1,
		.msix_table_off = MODEL_MSIX_TABLE,
		.msix_pba_off = MODEL_MSIX_PBA,
	};
	unsigned long index = 0, mem_mib = 512;
	struct sigaction sa = { .sa_handler = on_signal };
	struct rbln_vfu *vfu;
	int opt, ret, status = 0;
	unsigned int i;
	char *end;

	while ((opt = getopt_long(argc, argv, "s:i:m:h", opts, NULL)) != -1) {
		switch (opt) {
		case 's':
			if (num_models == MODEL_MAX_DEVICES) {
				fprintf(stderr, "%s: at most %d devices\n", argv[0], MODEL_MAX_DEVICES);
				return 2;
			}
			models[num_models++].socket = optarg;
			break;
		case 'i':
			index = strtoul(optarg, &end, 0);
			if (*end || index > 1023) {
				fprintf(stderr, "%s: --index takes 0..1023\n", argv[0]);
				return 2;
			}
			break;
		case 'm':
			mem_mib = strtoul(optarg, &end, 0);
			if (*end || mem_mib < 4 || mem_mib > 64 * 1024) {
				fprintf(stderr, "%s: --mem-mib takes 4..65536\n", argv[0]);
				return 2;
			}
			break;
		case 'h':
			usage(stdout, argv[0]);
			return 0;
		default:
			usage(stderr, argv[0]);
			return 2;
		}
	}
	if (!num_models || optind != argc || index + num_models > 1024) {
		usage(stderr, argv[0]);
		return 2;
	}
	/* Before the first socket exists: whoever waits for it may stop us. */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	for (i = 0; i < num_models; i++) {
		struct npu_model *model = &models[i];

		/*
		 * SERIAL is never reused while the guest runs: the process ID
		 * is unique among live processes, and bit 63 keeps it apart
		 * from the serials of rbln.ko's own emulated NPUs, which count
		 * from 1.
		 */
		ret = rbln_emu_dev_init(&model->edev, index + i, (u64)mem_mib << 20,
					BIT_ULL(63) | (u64)getpid() << 16 | i);
		if (ret) {
			fprintf(stderr, "%s: cannot create NPU %lu: %s\n", argv[0], index + i,
				strerror(-ret));
			return 1;
		}
		vfu = rbln_vfu_listen(model->socket, &cfg, &model_ops, &model->edev);
		if (!vfu) {
			fprintf(stderr, "%s: cannot listen on %s: %m\n", argv[0], model->socket);
			return 1;
		}
		__atomic_store_n(&model->vfu, vfu, __ATOMIC_RELEASE);
		if (stopping)
			rbln_vfu_stop(vfu);
	}

	for (i = 0; i < num_models; i++) {
		ret = pthread_create(&models[i].thread, NULL, serve_thread, &models[i]);
		if (ret) {
			fprintf(stderr, "%s: pthread_create: %s\n", argv[0], strerror(ret));
			return 1;
		}
	}
	for (i = 0; i < num_models; i++) {
		pthread_join(models[i].thread, NULL);
		if (models[i].ret < 0)
			status = 1;
	}
	/* Every device has stopped: none reaches another's memory any more. */
	for (i = 0; i < num_models; i++) {
		rbln_emu_dev_fini(&models[i].edev);
		rbln_vfu_destroy(models[i].vfu);
	}
	return status;
}
