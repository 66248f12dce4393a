#!/usr/bin/env python3
"""allocsim fleet's throughput over a directory of snapshots: the command with one and all cores,
allocsim.fleet on a thread pool, and on a Dask LocalCluster of 1 and 2 worker processes (where
Dask's distributed is installed); nothing cached.

usage: fleet_throughput.py STAGED_PACKAGE_DIR DIR [CARD]   (e.g. build/python workloads 24GiB)
"""
import os
import subprocess
import sys
import time


def main():
    staged, folder = sys.argv[1], sys.argv[2]
    card = sys.argv[3] if len(sys.argv) > 3 else "24GiB"
    sys.path.insert(0, staged)
    import allocsim
    exe = allocsim.binary()
    os.environ["ALLOCSIM_BINARY"] = exe

    def timed(what, run):
        start = time.time()
        files = run()
        took = time.time() - start
        print(f"{what}: {files} files in {took:.2f} s, {files / took:.1f} files/s")

    def command(*extra):
        subprocess.run([exe, "fleet", folder, "--no-cache", "--card", card, *extra], check=True,
                       stdout=subprocess.DEVNULL)
        return len(subprocess.run([exe, "fleet", folder, "--list"], capture_output=True,
                                  text=True, check=True).stdout.split())

    timed("allocsim fleet --jobs 1", lambda: command("--jobs", "1"))
    timed("allocsim fleet (all cores)", lambda: command())
    timed("allocsim.fleet, thread pool",
          lambda: allocsim.fleet([folder], card=card, no_cache=True)["jobs"])
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        print("Dask's distributed is not installed: no LocalCluster figures")
        return
    for workers in (1, 2):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            timed(f"allocsim.fleet, Dask LocalCluster of {workers} worker process(es)",
                  lambda: allocsim.fleet([folder], executor=client.get_executor(), card=card,
                                         no_cache=True)["jobs"])


if __name__ == "__main__":
    main()
