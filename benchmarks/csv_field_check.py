"""What the ragged-record check costs when reading the private data (issue 30 item 7).

For each file: ``check`` (``platform/csv_fields.check_field_counts``, the pyarrow pass), ``read``
(``space.read_raw`` of the births space, which runs the check and pandas' read) and ``load``
(the release's ``load_private_data``: read, validate, clean), best of ``--repeats``. Printed:
``check / (read - check)``, the check against the pandas read it precedes, and ``check / load``.
Files: the NVSS 160K and 200K samples in ../shared/data (relative to the checkout) and a
1.6M-record file made of eight copies of the 200K one (written to a temporary folder, plain and
gzipped).

    python benchmarks/csv_field_check.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import tempfile
from pathlib import Path

from privlab.mechanisms.release.firewall import load_private_data
from privlab.mechanisms.tabular.space import load_release_space
from privlab.platform.core.csv_fields import check_field_counts
from best_time import best_seconds  # benchmarks/ is the script's folder, first on sys.path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "nvss"



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    space = load_release_space(ROOT / "experiments" / "births" / "space.toml")
    with tempfile.TemporaryDirectory() as folder:
        big = Path(folder) / "births_1600k.csv"
        with gzip.open(DATA / "birth_2019_nber_us_SINGLETON_SAMPLE200K.csv.gz", "rt") as source:
            lines = source.readlines()
        with big.open("w") as out:
            out.writelines(lines)
            for _ in range(7):
                out.writelines(lines[1:])
        with big.open("rb") as plain, gzip.open(big.with_suffix(".csv.gz"), "wb", compresslevel=1) as zipped:
            shutil.copyfileobj(plain, zipped)
        files = [DATA / "birth_2019_nber_us_SINGLETON_SAMPLE160K.csv.gz",
                 DATA / "birth_2019_nber_us_SINGLETON_SAMPLE200K.csv.gz", big, big.with_suffix(".csv.gz")]
        print(f"{'file':48} {'check s':>8} {'read s':>8} {'load s':>8} {'check/pandas':>13} {'check/load':>11}")
        over_pandas, over_load = [], []
        for path in files:
            check = best_seconds(lambda: check_field_counts(path, what="data"), args.repeats)
            read = best_seconds(lambda: space.read_raw(path, what="data"), args.repeats)
            load = best_seconds(lambda: load_private_data(path, space), args.repeats)
            over_pandas.append(check / max(read - check, 1e-9))
            over_load.append(check / load)
            print(f"{path.name:48} {check:8.3f} {read:8.3f} {load:8.3f} {over_pandas[-1]:13.2f} {over_load[-1]:11.2f}")
    print(f"load_average_1min: {os.getloadavg()[0]:.2f}")
    print(f"ragged_check_over_pandas_read_max: {max(over_pandas):.3f}")
    print(f"ragged_check_over_release_load_max: {max(over_load):.3f}")


if __name__ == "__main__":
    main()
