import operator
import re

from novella.scheduler.filters import BaseHostFilter

_ARCH_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "i386": "i686", "arm64": "aarch64"}
_VERSION_REQ = re.compile(r"^\s*(<=|>=|==|!=|<|>|=)?\s*([0-9][0-9.]*)\s*$")
_COMPARE = {"<=": operator.le, ">=": operator.ge, "==": operator.eq, "=": operator.eq,
            "!=": operator.ne, "<": operator.lt, ">": operator.gt}


def _arch(name):
    name = (name or "").lower()
    return _ARCH_ALIASES.get(name, name)


def _version(text):
    """'6.2.1' -> 6002001, the encoding hypervisor_version uses."""
    parts = [int(p) for p in str(text).split(".")[:3] if p.isdigit()]
    parts += [0] * (3 - len(parts))
    return parts[0] * 1000000 + parts[1] * 1000 + parts[2]


class ImagePropertiesFilter(BaseHostFilter):
    """The image's architecture, hypervisor type, vm mode and hypervisor version
    requirements must match what the host runs."""

    PROPERTIES = ("hw_architecture", "architecture", "img_hv_type", "hypervisor_type",
                  "hw_vm_mode", "vm_mode", "img_hv_requested_version")

    def applies(self, spec):
        props = (spec.get("image") or {}).get("properties") or {}
        return any(props.get(p) for p in self.PROPERTIES)

    def host_passes(self, host_state, spec):
        props = (spec.get("image") or {}).get("properties") or {}
        arch = props.get("hw_architecture") or props.get("architecture")
        hv_type = props.get("img_hv_type") or props.get("hypervisor_type")
        vm_mode = props.get("hw_vm_mode") or props.get("vm_mode")
        hv_version = props.get("img_hv_requested_version")
        host_arch = host_state.cpu_info.get("arch")
        if arch and host_arch and _arch(arch) != _arch(host_arch):
            return False
        if hv_type and (host_state.hypervisor_type or "").lower() != hv_type.lower():
            return False
        if vm_mode and vm_mode.lower() not in ("hvm", host_state.cpu_info.get("vm_mode", "hvm")):
            return False
        if hv_version:
            m = _VERSION_REQ.match(hv_version)
            if not m:
                return False
            compare = _COMPARE[m.group(1) or ">="]
            return compare(host_state.hypervisor_version or 0, _version(m.group(2)))
        return True
