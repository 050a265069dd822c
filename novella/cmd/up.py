"""`novella up`: the whole system in one process, until Ctrl-C."""
import logging
import signal
import threading

from novella.allinone import AllInOne


def main(args):
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    print(f"Starting Novella: {args.cells} cells x {args.hosts_per_cell} simulated hosts ...", flush=True)
    cloud = AllInOne(args.data_dir, cells=args.cells, hosts_per_cell=args.hosts_per_cell,
                     http=True, bind=args.host, port_base=args.port_base,
                     log=lambda msg: print("  " + msg, flush=True))
    cloud.start()
    print("Novella is up. Endpoints:", flush=True)
    for name, url in cloud.endpoints().items():
        print(f"  {name:<10} {url}", flush=True)
    print(f"Credentials for the admin and demo (member) users: {cloud.clouds_yaml}", flush=True)
    print(f"  export OS_CLIENT_CONFIG_FILE={cloud.clouds_yaml} OS_CLOUD=novella-admin", flush=True)
    print("  openstack server list; openstack resource provider list", flush=True)
    print("Stop with Ctrl-C; data stays in " + cloud.data_dir, flush=True)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    print("Stopping ...", flush=True)
    cloud.stop()
