"""What the search for a gone anchor costs, per release (issue 25).

    python bench/gone.py --series DIR [--releases 0.20.2,...] [--json out.json]

For every release, checks the series (``check --json``, in this process; the definition
index warm after a first pass) and, for every anchor of a patch that is ``gone`` or
``moved`` under another qualname, times :func:`patchq.compat.check.renamed_candidates`
alone (the search through the release's definition index: the files whose text declares
the last name, those that spell the pattern's identifiers, the candidate definitions'
own lines). Prints per release the number of such anchors, the total and the largest
time per anchor, and the files and segments the search looked at.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from patchq import series as series_mod  # noqa: E402
from patchq.compat import check  # noqa: E402
from patchq.plan import definitions  # noqa: E402
from patchq.vllmdist import sources  # noqa: E402

RELEASES = ("0.20.2,0.21.0,0.22.0,0.22.1,0.23.0,0.24.0,0.25.0,0.25.1,0.26.0,0.27.0,0.27.1,0.28.0,0.29.0,"
            "0.30.0,0.31.0,0.32.0,0.33.0")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--series", required=True)
    ap.add_argument("--releases", default=RELEASES)
    ap.add_argument("--json")
    args = ap.parse_args()
    os.environ["PATCHQ_VERDICT_CACHE"] = "0"
    s = series_mod.load(args.series)
    patches = s.patches_of("all")
    rows = []
    load = os.getloadavg()
    for v in args.releases.split(","):
        src = sources.release_source(v)
        gone = [r for r in check.check(src, patches)  # gone, or moved under another qualname (found by the search)
                if r.status == check.GONE or (r.status == check.MOVED and "not found anywhere" in r.reason)]
        times = []
        parsed = {"n": 0}
        real = check._parse_alone

        def counting(seg: str, _real=real, parsed=parsed) -> object:
            parsed["n"] += 1
            return _real(seg)

        check._parse_alone = counting  # type: ignore[assignment]
        try:
            for r in gone:
                for spec in s.patch(r.id).anchors.values():
                    t = time.perf_counter()
                    check.renamed_candidates(spec, src)
                    times.append(time.perf_counter() - t)
        finally:
            check._parse_alone = real  # type: ignore[assignment]
        definitions.save_all()
        rows.append({"release": v, "gone_anchors": len(times), "total_s": round(sum(times), 3),
                     "max_s": round(max(times), 3) if times else 0.0,
                     "mean_ms": round(1000 * sum(times) / len(times), 1) if times else 0.0,
                     "segments_parsed": parsed["n"]})
        print(f"{v}: {len(times)} gone anchor(s), {sum(times):.3f} s, max {max(times) if times else 0:.3f} s, "
              f"mean {rows[-1]['mean_ms']} ms, {parsed['n']} candidate segments parsed", flush=True)
    doc = {"load_before": load, "load_after": os.getloadavg(), "cpus": os.cpu_count(), "series": args.series,
           "rows": rows}
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
