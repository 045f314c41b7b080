/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * rbln_emu.h - the emulated NPU, as seen by the driver's bus glue
 *
 * Emulated NPUs sit on their own bus, "rbln_emu", the way netdevsim devices
 * do: the module parameter emu_devices creates the first ones, and
 * /sys/bus/rbln_emu/{new_device,del_device} add and remove them at run time.
 * A driver binds to them like to any other bus device and reaches the
 * hardware only through the struct rbln_hw returned by rbln_emu_hw().
 */
#ifndef __RBLN_EMU_H__
#define __RBLN_EMU_H__

#include <linux/device.h>

struct rbln_hw;

extern const struct bus_type rbln_emu_bus_type;

int rbln_emu_init(void);
void rbln_emu_exit(void);
int rbln_emu_add_initial(void);
void rbln_emu_remove_all(void);
struct rbln_hw *rbln_emu_hw(struct device *dev);
void rbln_emu_irq_detach(struct device *dev);

#endif /* __RBLN_EMU_H__ */
