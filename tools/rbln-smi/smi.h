/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * smi.h - rbln-smi's view of the machine: devices from sysfs, processes
 * from /proc/PID/fdinfo, and what the output formats need of them
 *
 * Everything is read without privileges: sysfs attributes are world
 * readable, and the fdinfo of another user's process is skipped when the
 * kernel refuses it.
 */
#ifndef RBLN_SMI_H
#define RBLN_SMI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

#define SMI_DRIVER		"rbln"
/* Directories of sysfs, relative to smi_sysfs. */
#define SMI_SYSFS_ACCEL		"class/accel"
#define SMI_SYSFS_MODULE	"module/" SMI_DRIVER

/*
 * Where sysfs is: "/sys", or, in the native tests, a directory holding a
 * tree of the same shape.
 */
extern const char *smi_sysfs;

/* Exit codes, documented in rbln-smi(1). */
enum smi_exit {
	SMI_EXIT_OK = 0,
	SMI_EXIT_NO_DEVICE = 1,	/* driver not loaded, or it drives no device */
	SMI_EXIT_USAGE = 2,
	SMI_EXIT_BAD_INDEX = 3,	/* -i names no device */
	SMI_EXIT_ERROR = 4,	/* a system error: memory, /proc, sysfs, output */
};

enum smi_health {
	SMI_HEALTH_OK,		/* every attribute read, no reset in the interval */
	SMI_HEALTH_RESET,	/* a hung job made the driver reset a ring lately */
	SMI_HEALTH_UNKNOWN,	/* an attribute could not be read */
};

/* Unknown values of a device (an attribute that could not be read). */
#define SMI_UNKNOWN	UINT64_MAX

struct smi_device {
	unsigned int index;		/* position in accel minor order */
	unsigned int minor;		/* N of /dev/accel/accelN */
	dev_t rdev;			/* the node's device number */
	char node[32];			/* /dev/accel/accelN */
	/*
	 * The parent device, /sys/class/accel/accelN/device: its name on its
	 * bus (rbln_emu0 for emulated NPU 0, 0000:00:03.0 for a PCI function)
	 * and that bus (rbln_emu, pci).
	 */
	char bus_id[64];
	char subsystem[32];
	bool emulated;
	uint64_t mem_total;		/* bytes, or SMI_UNKNOWN */
	uint64_t mem_used;
	uint64_t busy_ns;
	uint64_t num_rings;
	uint64_t reset_count;
	/* Hardware contexts; SMI_UNKNOWN from a driver without them. */
	uint64_t contexts_total;
	uint64_t contexts_used;
	uint64_t context_steals;
	/* Derived from two samples. */
	double utilization;		/* percent, or < 0 when not measured */
	uint64_t interval_ns;		/* between the two samples; 0: none */
	enum smi_health health;
};

/* Memory of one region (device or host) in fdinfo terms, bytes. */
struct smi_region {
	uint64_t total;
	uint64_t shared;
	uint64_t active;
	uint64_t resident;
};

/* The fault that banned a client's context: fdinfo's rbln-fault. */
struct smi_fault {
	char kind[24];			/* as the driver names it; "": none */
	uint64_t addr;
};

/* What the fdinfo of one descriptor says. */
struct smi_fdinfo {
	bool is_rbln;			/* an rbln DRM client with a client id */
	uint64_t client_id;
	uint64_t engine_ns;
	struct smi_region device;
	struct smi_region host;
	struct smi_fault fault;
};

/* One process's files on one device, every distinct DRM client counted once. */
struct smi_process {
	pid_t pid;
	char name[64];			/* /proc/PID/comm */
	unsigned int dev_index;		/* index of struct smi_device */
	uint64_t *clients;		/* drm-client-id, in the order found */
	struct smi_fault *faults;	/* of each client */
	size_t nclients;
	uint64_t engine_ns;		/* drm-engine-npu */
	struct smi_region device;
	struct smi_region host;
};

struct smi_snapshot {
	bool driver_loaded;
	char driver_version[64];	/* empty when the module has none */
	struct timespec mono;		/* when the devices were read */
	struct timespec wall;
	struct smi_device *devices;
	size_t ndevices;
	struct smi_process *procs;
	size_t nprocs;
	size_t procs_skipped;		/* processes whose files we may not read */
};

/* devices.c */
int smi_read_devices(struct smi_snapshot *snap);
void smi_derive(struct smi_snapshot *cur, const struct smi_snapshot *prev);
const char *smi_health_name(enum smi_health h);
const char *smi_device_name(const struct smi_device *d);
const char *smi_device_bus(const struct smi_device *d);
int smi_resolve(const struct smi_snapshot *s, const char *id);
int smi_for_each_param(int (*fn)(const char *name, const char *value, void *arg),
		       void *arg);
int smi_snapshot_take(struct smi_snapshot *snap, bool with_procs);
void smi_snapshot_free(struct smi_snapshot *snap);
int smi_read_string(const char *path, char *buf, size_t size);
int smi_read_u64(const char *path, uint64_t *value);

/* procs.c */
int smi_read_processes(struct smi_snapshot *snap);
int smi_parse_fdinfo(FILE *f, struct smi_fdinfo *info);

/* output.c, json.c: each writes one frame to @out; 0 or -errno. */
struct smi_view {
	const struct smi_snapshot *snap;
	int only;			/* a device index; -1: all; INT_MAX: none */
	bool loop;			/* a frame of -l */
};

int smi_print_table(FILE *out, const struct smi_view *v);
int smi_print_query(FILE *out, const struct smi_view *v);
int smi_print_json(FILE *out, const struct smi_view *v);

#endif /* RBLN_SMI_H */
