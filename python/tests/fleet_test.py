"""allocsim.fleet against `allocsim fleet`: a directory of shipped recordings (one process on two
GPUs, one ending at an OOM), a snapshot in the OOM advisor's layout, a corrupt file and a
non-snapshot among them; the same report from the command on all cores, from a local process pool,
and from a Dask LocalCluster of worker processes; a second run reuses the cache.

usage: fleet_test.py STAGED_PACKAGE_DIR WORKLOADS_DIR   (exit 77: Dask is not installed)
"""
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile

staged, workloads = sys.argv[1], sys.argv[2]
sys.path.insert(0, staged)
import allocsim  # noqa: E402

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def comparable(report):
    r = dict(report)
    r.pop("jobs_from_cache")
    return json.dumps(r, sort_keys=True)


def main():
    with tempfile.TemporaryDirectory(prefix="allocsim-fleet-test-") as tmp:
        data = os.path.join(tmp, "snapshots")
        os.makedirs(os.path.join(data, "team-a"))
        os.makedirs(os.path.join(data, "oom-reports"))
        for name in ("resnet50_default", "twogpu_cap4000000000", "gpt2-leak_default_stacks"):
            shutil.copy(os.path.join(workloads, name + ".pickle.gz"), os.path.join(data, "team-a"))
        # The advisor's layout: the snapshot beside its advice, whose limit the job is planned under.
        shutil.copy(os.path.join(workloads, "llama-varlen-bf16_default_cap10500000000.pickle.gz"),
                    os.path.join(tmp, "oom.pickle.gz"))
        subprocess.run(["gzip", "-d", os.path.join(tmp, "oom.pickle.gz")], check=True)
        shutil.move(os.path.join(tmp, "oom.pickle"),
                    os.path.join(data, "oom-reports", "oom-20261126-030000.pickle"))
        with open(os.path.join(data, "oom-reports", "oom-20261126-030000.json"), "w") as f:
            json.dump({"limit_bytes": 10_500_000_000}, f)
        with open(os.path.join(data, "team-a", "corrupt.pickle"), "wb") as f:
            f.write(b"\x80\x04not a snapshot")
        with open(os.path.join(data, "notes.txt"), "w") as f:
            f.write("not a snapshot")

        exe = allocsim.binary()
        cache = os.path.join(tmp, "cache")
        html = os.path.join(tmp, "fleet.html")
        p = subprocess.run([exe, "fleet", data, "--out", html, "--json", "-", "--cache", cache,
                            "--card", "24GiB"], capture_output=True, text=True)
        check(p.returncode == 0, f"allocsim fleet exits 0 ({p.returncode}: {p.stderr.strip()[-300:]})")
        cli = json.loads(p.stdout)
        check(cli["jobs"] == 5 and len(cli["failed"]) == 1 and "corrupt.pickle" in cli["failed"][0]["file"],
              f"five files, the corrupt one listed, not fatal: {cli['failed']}")
        check(cli["totals"]["devices"] == 5, "a row per device history (two for the two-GPU job)")
        oom = [r for r in cli["rows"] if "oom-reports" in r["file"]][0]
        check(oom["oom"] and oom["limit_bytes"] == 10_500_000_000 and not oom["fits"] and
              oom["best_alloc_conf"] == "expandable_segments:True" and oom["best_margin_bytes"] > 0,
              "the advisor's snapshot planned under its limit: expandable segments fit")
        check(any(r["leak"] for r in cli["rows"]), "the leaking job is found")
        with open(html) as f:
            page = f.read()
        check(page.startswith("<!doctype html>") and "<script>" in page and "corrupt.pickle" in page,
              "one self-contained HTML page, the unreadable file listed")

        # The report's keys are the types' (allocsim.FleetReport and the classes it holds).
        typed = allocsim.reports
        totals = cli["totals"]
        shaped = [("FleetReport", typed.FleetReport, cli),
                  ("FleetTotals", typed.FleetTotals, totals)]
        shaped += [("FleetFailure", typed.FleetFailure, x) for x in cli["failed"]]
        from allocsim.fleet import analyze_job
        for f in sorted({r["file"] for r in cli["rows"]} | {x["file"] for x in cli["failed"]}):
            job = analyze_job(f, ["--no-cache", "--card", "24GiB"])
            shaped += [("FleetJob", typed.FleetJob, job)]
            shaped += [("FleetDevice", typed.FleetDevice, d) for d in job.get("devices", [])]
        shaped += [("FleetSettingTotals", typed.FleetSettingTotals, x) for x in totals["settings"]]
        shaped += [("FleetSiteTotals", typed.FleetSiteTotals, x)
                   for x in totals["top_sites_at_oom"]]
        for row in cli["rows"]:
            shaped += [("FleetRow", typed.FleetRow, row)]
            shaped += [("FleetSetting", typed.FleetSetting, x) for x in row["settings"]]
            shaped += [("SiteBytes", typed.SiteBytes, x) for x in row["sites_at_oom"]]
        for what, cls, obj in shaped:
            extra = set(obj) - cls.__required_keys__ - cls.__optional_keys__
            missing = cls.__required_keys__ - set(obj)
            check(not extra and not missing,
                  f"{what}: keys not typed {sorted(extra)}, typed but missing {sorted(missing)}")

        # Pairs: one job's two runs, B against A, the same from Python as from the command.
        pair = (os.path.join(workloads, "diff_pairs", "base_b8.pickle.gz"),
                os.path.join(workloads, "diff_pairs", "keep_b8.pickle.gz"))
        p = subprocess.run([exe, "fleet", "--pair", *pair, "--json", "-"], capture_output=True,
                           text=True)
        paired_cli = json.loads(p.stdout)
        paired = allocsim.fleet([], pairs=[pair])
        d = paired["pairs"][0]["devices"][0]
        check(paired["pairs"] == paired_cli["pairs"] and d["difference"] == 0 and
              d["top_groups"][0]["delta_at_peak"] == 16 << 20,
              f"fleet(pairs=): the command's pairs; the kept outputs hold 16 MiB at the peak ({d})")
        shaped += [("FleetPair", typed.FleetPair, paired["pairs"][0]),
                   ("FleetPairDevice", typed.FleetPairDevice, d),
                   ("FleetPairGroup", typed.FleetPairGroup, d["top_groups"][0]),
                   ("FleetReport with pairs", typed.FleetReport, paired)]
        for what, cls, obj in shaped[-4:]:
            extra = set(obj) - cls.__required_keys__ - cls.__optional_keys__
            missing = cls.__required_keys__ - set(obj)
            check(not extra and not missing,
                  f"{what}: keys not typed {sorted(extra)}, typed but missing {sorted(missing)}")

        pooled = allocsim.fleet([data], card="24GiB", cache=cache)
        check(comparable(pooled) == comparable(cli), "allocsim.fleet on a local pool: the same report")
        check(pooled["jobs_from_cache"] == 5, "a second run takes every unchanged file from the cache")
        with concurrent.futures.ProcessPoolExecutor(2) as pool:
            processes = allocsim.fleet([data], executor=pool, card="24GiB", no_cache=True)
        check(comparable(processes) == comparable(cli), "on a process pool, uncached: the same report")

        p = subprocess.run([exe, "fleet", data, "--scheduler", "tcp://127.0.0.1:1"],
                           capture_output=True, text=True)
        check(p.returncode == 2 and "python3 -m allocsim fleet" in p.stderr,
              f"the binary alone points --scheduler to Python ({p.returncode}: {p.stderr.strip()})")
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            print("skipped: Dask's distributed is not installed (python/requirements-test.txt has it)")
            return 77 if not failures else 1
        os.environ["ALLOCSIM_BINARY"] = exe  # the workers' allocsim
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            dask = allocsim.fleet([data], executor=client.get_executor(), card="24GiB",
                                  no_cache=True)
            check(comparable(dask) == comparable(cli), "on a Dask LocalCluster: the same report")
            address = cluster.scheduler_address
            env = dict(os.environ, PYTHONPATH=staged)
            p = subprocess.run([sys.executable, "-m", "allocsim", "fleet", data, "--scheduler",
                                address, "--json", "-", "--card", "24GiB", "--no-cache"],
                               capture_output=True, text=True, env=env)
            check(p.returncode == 0 and comparable(json.loads(p.stdout)) == comparable(cli) and
                  not p.stderr.strip(),
                  f"python -m allocsim fleet --scheduler {address}: the same report, nothing on "
                  f"stderr ({p.stderr.strip()[-300:]})")
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


# Dask's worker processes start by importing this file: the test runs only as the main program.
if __name__ == "__main__":
    sys.exit(main())
