"""QEMU guests driven straight over QMP: the layer a real compute driver maps onto.

``Host`` is one compute host's hypervisor: its instances directory (disks,
console logs), its image cache (``_base``, the images guests' overlays stand
on), and a short run directory for the guests' UNIX sockets. Several
``Host`` objects on one machine are independent hosts, so a migration between
two of them is a real one. ``Guest`` is one QEMU process: start, status,
pause, power off, stop, and live migration with the progress figures QEMU
reports. docs/real-guests.md says why QMP and not libvirt.
"""
