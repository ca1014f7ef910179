"""spark-submit's entry point: ``kinspect spark`` with the same arguments and options.

    spark-submit --master spark://HEAD:7077 --archives env.tar.gz#environment \\
        --conf spark.pyspark.python=./environment/bin/python \\
        "$(python -m kinspect.cli.spark_submit --path)" /shared/captures/ --out /shared/tables/

spark-submit runs this file with its own Python (spark.pyspark.driver.python, PYSPARK_DRIVER_PYTHON,
else python3), which must have kinspect installed; its --master, --archives and --conf are the
session's settings, so kinspect's --master and --package may be left out. ``python -m
kinspect.cli.spark_submit --path`` prints this file's path.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv: list[str] | None = None) -> None:
    from kinspect.cli.spark import spark
    spark.main(args=argv, prog_name="kinspect spark")


if __name__ == "__main__":
    if sys.argv[1:] == ["--path"]:
        print(os.path.abspath(__file__))
        sys.exit(0)
    # run as a file, Python put this directory first on the path: its modules are kinspect.cli's
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
    main()
