"""Helpers shared by the benchmarks in bench/.

The benchmarks print figures; none of them asserts a timing. Each one measures
Novella and, in the same run, the reference (Nova's own functional harness in
a scratch virtualenv outside the repository, see ``ensure_refnova_venv``), and
prints the ratio between the two.
"""
import json
import os
import resource
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if REPO not in sys.path:
    sys.path.insert(0, REPO)

REFNOVA = os.environ.get("NOVELLA_REFNOVA_VENV", "/work/refnova")
REFERENCE_PACKAGES = [
    "nova==34.0.0", "openstack-placement==16.0.0", "sqlalchemy<2.1",
    "fixtures", "testtools", "oslotest", "wsgi-intercept", "requests-mock",
    "ddt", "testscenarios",
]
REFERENCE_OPS = ("boot", "delete", "resize", "migrate", "cross_cell_resize")


# -- the reference ----------------------------------------------------------------

def _venv_python(venv=REFNOVA):
    return os.path.join(venv, "bin", "python")


def _site_packages(python):
    out = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         check=True, capture_output=True, text=True, timeout=60)
    return out.stdout.strip()


def ensure_refnova_venv(venv=REFNOVA, log=None):
    """Create the reference's virtualenv on demand; return its interpreter.

    The reference is installed from the package index into a venv outside the
    repository; only its interpreter is used, through a subprocess. The API
    harness reads ``etc/nova/api-paste.ini`` beside site-packages, so the
    ini files installed under the venv's ``etc/nova`` are copied there.
    """
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    python = _venv_python(venv)
    marker = os.path.join(venv, ".novella-bench-ready")
    if os.path.exists(marker):
        return python
    if not os.path.exists(python):
        log(f"creating the reference venv in {venv} (a few minutes, once)")
        subprocess.run([sys.executable, "-m", "venv", venv], check=True, timeout=300)
    probe = subprocess.run([python, "-c", "import nova, placement, testtools, wsgi_intercept"],
                           capture_output=True, timeout=120)
    if probe.returncode != 0:
        log("installing nova 34 and its functional test dependencies into the reference venv")
        logfile = os.path.join(venv, "pip-install.log")
        with open(logfile, "w") as fh:
            rc = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q"] + REFERENCE_PACKAGES,
                                stdout=fh, stderr=subprocess.STDOUT, timeout=1800).returncode
        if rc != 0:
            raise RuntimeError(f"pip install into {venv} failed (rc={rc}); see {logfile}")
    site = _site_packages(python)
    src = os.path.join(venv, "etc", "nova")
    dst = os.path.join(site, "etc", "nova")
    if os.path.isdir(src):
        os.makedirs(dst, exist_ok=True)
        for name in os.listdir(src):
            if name.endswith(".ini"):
                shutil.copy2(os.path.join(src, name), os.path.join(dst, name))
    if not os.path.exists(os.path.join(dst, "api-paste.ini")):
        raise RuntimeError(f"api-paste.ini not found under {src}; the reference harness needs it in {dst}")
    with open(marker, "w") as fh:
        fh.write("ready\n")
    return python


def run_reference(ops, repeat=3, timeout=600, venv=REFNOVA):
    """Time ``ops`` in the reference's functional harness; return its JSON document.

    The document maps each operation to ``{"samples": [...], "median": s, ...}``
    (seconds); see bench/reference_nova.py.
    """
    python = ensure_refnova_venv(venv)
    ops = [ops] if isinstance(ops, str) else list(ops)
    cmd = [python, "-W", "ignore", os.path.join(HERE, "reference_nova.py"),
           "--ops", ",".join(ops), "--repeat", str(repeat)]
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    # The reference must not see this repository's packages.
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd="/tmp", env=env)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.splitlines()[-40:])
        raise RuntimeError(f"reference run failed (rc={proc.returncode}):\n{tail}")
    return json.loads(proc.stdout)


def reference_or_none(ops, repeat, skip=False):
    """run_reference, or None (with a note) when skipped or unavailable."""
    if skip:
        return None
    try:
        return run_reference(ops, repeat)
    except Exception as exc:  # a missing reference must not hide Novella's figures
        print(f"reference not measured: {exc}", file=sys.stderr)
        return None


# -- statistics and memory -----------------------------------------------------------

def percentile(values, pct):
    """The ``pct`` percentile of ``values`` (linear interpolation), or None."""
    vals = sorted(values)
    if not vals:
        return None
    if len(vals) == 1:
        return vals[0]
    k = (len(vals) - 1) * pct / 100.0
    lo = int(k)
    hi = min(lo + 1, len(vals) - 1)
    return vals[lo] + (vals[hi] - vals[lo]) * (k - lo)


def p50(values):
    return percentile(values, 50)


def p95(values):
    return percentile(values, 95)


def summary(values):
    return {"n": len(values), "p50": p50(values), "p95": p95(values),
            "min": min(values) if values else None, "max": max(values) if values else None}


def peak_rss_mb():
    """Peak resident set size of this process, MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def pid_rss_mb(pid):
    """Current and peak resident set size of ``pid`` from /proc, MiB: (rss, hwm)."""
    rss = hwm = None
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) / 1024.0
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return rss, hwm


class Timer:
    """Wall time (``elapsed``) and this process's CPU time (``cpu``) of a block."""

    def __enter__(self):
        self.start, self.cpu_start = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.elapsed = time.perf_counter() - self.start
        self.cpu = time.process_time() - self.cpu_start
        return False


# -- printing ---------------------------------------------------------------------------

def fmt(value, unit=""):
    if value is None:
        return "-"
    if isinstance(value, float):
        if unit == "s":
            return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"
        return f"{value:.1f}{(' ' + unit) if unit else ''}"
    return f"{value}{(' ' + unit) if unit else ''}"


def ratio(reference, novella):
    """How many times faster Novella is (reference time / Novella time)."""
    if not reference or not novella:
        return None
    return reference / novella


def print_table(title, rows, headers=("metric", "novella", "reference", "ratio")):
    """Print a plain-text (markdown-compatible) table.

    ``rows`` are tuples; a float ``ratio`` column is printed as ``12.3x``.
    """
    cells = []
    for row in rows:
        out = []
        for i, v in enumerate(row):
            if headers[i] == "ratio":
                out.append("-" if v is None else f"{v:.1f}x")
            else:
                out.append("-" if v is None else str(v))
        cells.append(out)
    widths = [max(len(str(h)), *(len(r[i]) for r in cells)) if cells else len(str(h))
              for i, h in enumerate(headers)]
    print()
    print(f"## {title}")
    print("| " + " | ".join(str(h).ljust(w) for h, w in zip(headers, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in cells:
        print("| " + " | ".join(v.ljust(w) for v, w in zip(r, widths)) + " |")
    sys.stdout.flush()


def machine_line():
    import platform
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()}, {platform.system()} {platform.machine()}, "
            f"load average {load}")


def resize_all_then_confirm(aio, client, flavors, other_flavor):
    """Resize every server of ``flavors`` ({id: flavor id}) to ``other_flavor(...)``
    at once, wait, confirm those in VERIFY_RESIZE at once, wait.

    ``flavors`` is updated to each server's flavor after the run (a move that
    rolled back keeps the old one). Returns the ids that were resized.
    """
    ids = sorted(flavors)
    for sid in ids:
        flavors[sid] = other_flavor(flavors[sid])
        client.expect("POST", f"/servers/{sid}/action", {"resize": {"flavorRef": flavors[sid]}})
    aio.wait_idle(1800)
    resized = {s["id"] for s in client.list_servers() if s["status"] == "VERIFY_RESIZE"}
    for sid in ids:
        if sid in resized:
            client.expect("POST", f"/servers/{sid}/action", {"confirmResize": None})
        else:
            flavors[sid] = other_flavor(flavors[sid])  # rolled back to its old flavor
    aio.wait_idle(1800)
    return resized
