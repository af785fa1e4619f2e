#!/usr/bin/env python3
"""Generate the `resource` suite: its small CSV files and its tasks.jsonl.

Each task is one whose natural first attempt commonly exceeds a default
limit of `retrace run` (512M of memory, 10 s of CPU and of wall time, 1M of
output, Python's recursion limit): it materialises a large product or
matrix, brute-forces 10^8-10^9 cases where a formula or a vectorised form
exists, recurses 10^5 deep, or prints a huge table. Every reference runs
well within those limits. The tasks were chosen by what they are, never by
what a model produced on them.

Standard library only and deterministic (each file has its own
`random.Random(seed)`), so running it again reproduces byte-identical files:

    python3 datasets/resource/generate.py

Every expected value is computed here by a route other than the reference's
(brute force in chunks, another algorithm, a closed form), which is why the
script takes a minute or two. `retrace tasks validate resource` then checks
the references against those values.
"""

import bisect
import csv
import json
import math
import os
import random
from collections import Counter, defaultdict
from itertools import compress

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "data")


def write_csv(name, header, rows):
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, name), "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


def number(value, tol=1e-9):
    if isinstance(value, int) and abs(value) > 2**53:
        return {"type": "number", "value": float(value), "abs_tol": tol, "exact": str(value)}
    return {"type": "number", "value": float(value), "abs_tol": tol}


# ------------------------------------------------------------------ data files


def points():
    rng = random.Random(5001)
    rows = [(i, f"{rng.uniform(0, 400):.3f}", f"{rng.uniform(0, 400):.3f}") for i in range(1, 12001)]
    write_csv("points.csv", ["point_id", "x", "y"], rows)
    return [(float(x), float(y)) for _, x, y in rows]


def members():
    rng = random.Random(5002)
    teams = ["Amber", "Birch", "Cedar", "Dune", "Ember"]
    rows = [(i, rng.choice(teams), rng.randint(1960, 2004)) for i in range(1, 15001)]
    write_csv("members.csv", ["member_id", "team", "birth_year"], rows)
    return rows


def readings():
    rng = random.Random(5003)
    rows = [(i, rng.randint(0, 99999)) for i in range(1, 8001)]
    write_csv("readings.csv", ["seq", "value"], rows)
    return [v for _, v in rows]


def org():
    rng = random.Random(5004)
    n = 6000
    # One long chain (ids shuffled) plus side branches hanging off it.
    ids = list(range(1, n + 1))
    rng.shuffle(ids)
    chain = ids[:4500]
    manager = {chain[0]: None}
    for a, b in zip(chain, chain[1:]):
        manager[b] = a
    placed = list(chain)
    for e in ids[4500:]:
        manager[e] = rng.choice(placed)
        placed.append(e)
    rows = sorted((e, "" if manager[e] is None else manager[e]) for e in ids)
    write_csv("org.csv", ["employee_id", "manager_id"], rows)
    return manager


def ledger():
    rng = random.Random(5005)
    rows = []
    for i in range(1, 6001):
        cust = f"C{rng.randint(1, 400):03d}"
        day = rng.randint(0, 365)
        month_days = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        m = 0
        while day >= month_days[m]:
            day -= month_days[m]
            m += 1
        rows.append((i, cust, f"2024-{m + 1:02d}-{day + 1:02d}", f"{rng.uniform(5, 120):.2f}"))
    write_csv("ledger.csv", ["txn_id", "customer", "date", "amount"], rows)
    return rows


# ------------------------------------------------------------ expected values


def pairdist_values():
    return [(i * 7919) % 100003 for i in range(1, 100001)]


def expected_pairdist():
    # Independent route: sum over pairs by counting values by size, in
    # the order of values (a running count and running sum, not sorted
    # prefix sums of the reference).
    xs = pairdist_values()
    cnt = Counter(xs)
    total, below_n, below_sum = 0, 0, 0
    for v in sorted(cnt):
        c = cnt[v]
        total += c * (v * below_n - below_sum)
        below_n += c
        below_sum += c * v
    return 2 * total


def expected_coprime(n=50000):
    # Möbius: sum_d mu(d) * floor(n/d)^2.
    mu = [1] * (n + 1)
    is_comp = bytearray(n + 1)
    for p in range(2, n + 1):
        if not is_comp[p]:
            for m in range(p, n + 1, p):
                if m > p:
                    is_comp[m] = 1
                mu[m] = -mu[m]
            for m in range(p * p, n + 1, p * p):
                mu[m] = 0
    return sum(mu[d] * (n // d) ** 2 for d in range(1, n + 1))


def expected_powers(limit=1000):
    # Brute force, outside any sandbox (about 1.5G of big integers).
    seen = set()
    for a in range(2, limit + 1):
        for b in range(2, limit + 1):
            seen.add(a**b)
    # hash collisions are possible in principle: cross-check by exponents
    # of the smallest base below.
    by_root = 0
    done = set()
    for a in range(2, limit + 1):
        if a in done:
            continue
        k, p = 1, a
        while p <= limit:
            done.add(p)
            k, p = k + 1, p * a
        k -= 1
        by_root += len({i * b for i in range(1, k + 1) for b in range(2, limit + 1)})
    assert by_root == len(seen), (by_root, len(seen))
    return by_root


def expected_digitsum(n=123456789):
    # Chunked brute force over blocks of 10^4: digit sum of q*10^4 + r.
    block = [sum(map(int, str(r))) for r in range(10000)]
    block_total = sum(block)
    total = 0
    q_max, r_max = divmod(n, 10000)
    for q in range(q_max):
        total += 10000 * sum(map(int, str(q))) + block_total
    total += (r_max + 1) * sum(map(int, str(q_max))) + sum(block[: r_max + 1])
    return total


def expected_div357(n=10**9):
    # Count by residues modulo 105.
    good = [r for r in range(105) if (r % 3 == 0 or r % 5 == 0) and r % 7 != 0]
    q, rem = divmod(n, 105)
    return q * len(good) + sum(1 for r in good if 1 <= r <= rem)


def expected_primesum(n=10**8):
    # Segmented sieve (the reference sieves in one piece).
    root = math.isqrt(n) + 1
    small = bytearray([1]) * (root + 1)
    small[0:2] = b"\x00\x00"
    for p in range(2, math.isqrt(root) + 1):
        if small[p]:
            small[p * p :: p] = bytearray(len(small[p * p :: p]))
    primes = [p for p in range(root + 1) if small[p]]
    total, seg = 0, 10**6
    for lo in range(0, n, seg):
        hi = min(lo + seg, n)
        s = bytearray([1]) * (hi - lo)
        for p in primes:
            if p * p >= hi:
                break
            start = max(p * p, (lo + p - 1) // p * p)
            s[start - lo :: p] = bytearray(len(s[start - lo :: p]))
        if lo == 0:
            s[0:2] = b"\x00\x00"
        total += sum(compress(range(lo, hi), s))
    return total


def expected_divisorsum(n=10**9):
    # sum_{n<=N} floor(N/n) = number of (a, b) with a*b <= N, counted by
    # blocks of equal quotient.
    total, i = 0, 1
    while i <= n:
        q = n // i
        j = n // q
        total += q * (j - i + 1)
        i = j + 1
    return total


def expected_squarefree(n=10**10):
    # Count by the square part: n = k^2 * m with m squarefree, so
    # Q(n) = n - sum_{k>=2} Q-contributions; use the inclusion-exclusion
    # over squarefree k with a Möbius table built by factorisation.
    r = math.isqrt(n)
    total = 0
    for d in range(1, r + 1):
        m, x, sign, ok = d, d, 1, True
        p = 2
        while p * p <= x:
            if x % p == 0:
                x //= p
                if x % p == 0:
                    ok = False
                    break
                sign = -sign
            p += 1
        if not ok:
            continue
        if x > 1:
            sign = -sign
        total += sign * (n // (m * m))
    return total


def expected_recurrence(n=100000, mod=1_000_000_007):
    # Exact integers, reduced once at the end (the reference reduces each step).
    t = [0] * (n + 1)
    for i in range(1, n + 1):
        t[i] = t[i - 1] + t[i // 2] + 1
    return t[n] % mod


def edit_strings():
    s = "".join("ACGT"[(i * i + 3 * i) % 7 % 4] for i in range(1000))
    t = "".join("ACGT"[(5 * i + i * i * i) % 11 % 4] for i in range(1000))
    return s, t


def expected_editdistance():
    # Column by column (the reference goes row by row).
    s, t = edit_strings()
    prev = list(range(len(s) + 1))
    for j in range(1, len(t) + 1):
        cur = [j] + [0] * len(s)
        for i in range(1, len(s) + 1):
            cur[i] = min(prev[i] + 1, cur[i - 1] + 1, prev[i - 1] + (s[i - 1] != t[j - 1]))
        prev = cur
    return prev[-1]


def expected_abundant(n=300000):
    # sigma is multiplicative: factor each k by its smallest prime factor.
    spf = list(range(n + 1))
    for p in range(2, math.isqrt(n) + 1):
        if spf[p] == p:
            for m in range(p * p, n + 1, p):
                if spf[m] == m:
                    spf[m] = p
    count = 0
    for k in range(2, n + 1):
        x, s = k, 1
        while x > 1:
            p, pk, part = spf[x], 1, 1
            while x % p == 0:
                x //= p
                pk *= p
                part += pk
            s *= part
        if s > 2 * k:
            count += 1
    return count


def expected_pascal(rows=20000):
    # Each row mod 2 as the bits of an integer: row(n+1) = row(n) ^ (row(n) << 1).
    row, total = 1, 0
    for _ in range(rows):
        total += bin(row).count("1")
        row ^= row << 1
    return total


def expected_pairs(pts, r=1.0):
    # Sort by x and sweep (the reference buckets into a grid).
    pts = sorted(pts)
    xs = [p[0] for p in pts]
    count = 0
    for i, (x, y) in enumerate(pts):
        j = bisect.bisect_right(xs, x + r)
        for k in range(i + 1, j):
            dx, dy = pts[k][0] - x, pts[k][1] - y
            if dx * dx + dy * dy <= r * r:
                count += 1
    return count


def expected_selfjoin(rows):
    # Per team, years sorted, a two-pointer window (the reference counts
    # by year).
    by_team = defaultdict(list)
    for _, team, year in rows:
        by_team[team].append(year)
    total = 0
    for years in by_team.values():
        years.sort()
        lo = 0
        for hi, y in enumerate(years):
            while years[lo] < y - 2:
                lo += 1
            total += hi - lo
    return total


def expected_triples(values):
    # O(n^2): for each middle element count smaller before and larger after.
    n = len(values)
    total = 0
    for j in range(n):
        v = values[j]
        before = sum(1 for i in range(j) if values[i] < v)
        after = sum(1 for k in range(j + 1, n) if values[k] > v)
        total += before * after
    return total


def expected_orgdepth(manager):
    # Walk up from every employee (no memo): the longest chain in people.
    best = 0
    for e in manager:
        d, m = 1, manager[e]
        while m is not None:
            d, m = d + 1, manager[m]
        best = max(best, d)
    return best


def expected_daily(rows):
    totals = defaultdict(float)
    for _, cust, date, amount in rows:
        totals[(cust, date)] += float(amount)
    return sum(1 for v in totals.values() if round(v, 2) > 150)


# ------------------------------------------------------------------ the tasks


def task(id, question, expected, reference, tags, files=(), packages=()):
    return {
        "id": id,
        "question": question,
        "files": [f"data/{f}" for f in files],
        "expected": expected,
        "reference": reference,
        "packages": list(packages),
        "tags": list(tags),
    }


def tasks():
    pts, mem, vals, mgr, led = points(), members(), readings(), org(), ledger()
    out = []
    out.append(task(
        "res-mem-001",
        "Let x_i = (7919 * i) mod 100003 for i = 1, 2, ..., 100000. Compute the sum of |x_i - x_j| over all ordered pairs (i, j) with 1 <= i, j <= 100000. Give the answer as an integer.",
        number(expected_pairdist()),
        "xs = sorted((7919 * i) % 100003 for i in range(1, 100001))\n"
        "# sum over i<j of (x_j - x_i) for sorted x: x_k appears k times with + and n-1-k times with -\n"
        "n = len(xs)\n"
        "half = sum(x * (2 * k - n + 1) for k, x in enumerate(xs))\n"
        "answer = 2 * half\n",
        ["limit:memory", "limit:cpu", "outer-product"],
    ))
    out.append(task(
        "res-mem-002",
        "How many ordered pairs (a, b) of integers with 1 <= a, b <= 50000 have gcd(a, b) = 1? Give the answer as an integer.",
        number(expected_coprime()),
        "n = 50000\n"
        "phi = list(range(n + 1))\n"
        "for p in range(2, n + 1):\n"
        "    if phi[p] == p:\n"
        "        for m in range(p, n + 1, p):\n"
        "            phi[m] -= phi[m] // p\n"
        "answer = 2 * sum(phi[1:]) - 1\n",
        ["limit:memory", "limit:cpu", "number-theory"],
    ))
    out.append(task(
        "res-mem-003",
        "How many distinct values does a^b take for integers 2 <= a <= 1000 and 2 <= b <= 1000? Give the answer as an integer.",
        number(expected_powers()),
        "limit = 1000\n"
        "# a^b = r^(i*b) for the root r of a (a = r^i, r not a perfect power)\n"
        "seen_roots = set()\n"
        "count = 0\n"
        "for r in range(2, limit + 1):\n"
        "    if r in seen_roots:\n"
        "        continue\n"
        "    k, p = 0, r\n"
        "    while p <= limit:\n"
        "        seen_roots.add(p)\n"
        "        k, p = k + 1, p * r\n"
        "    count += len({i * b for i in range(1, k + 1) for b in range(2, limit + 1)})\n"
        "answer = count\n",
        ["limit:memory", "big-integers"],
    ))
    out.append(task(
        "res-mem-004",
        "What is the sum of the decimal digits of all the integers from 1 to 123456789 inclusive? Give the answer as an integer.",
        number(expected_digitsum()),
        "def digit_sum_upto(n):\n"
        "    # sum of digit sums of 0..n, position by position\n"
        "    total, p = 0, 1\n"
        "    while p <= n:\n"
        "        high, cur, low = n // (p * 10), (n // p) % 10, n % p\n"
        "        total += high * 45 * p\n"
        "        total += (cur * (cur - 1) // 2) * p + cur * (low + 1)\n"
        "        p *= 10\n"
        "    return total\n"
        "answer = digit_sum_upto(123456789)\n",
        ["limit:memory", "limit:cpu", "limit:wall", "digits"],
    ))
    out.append(task(
        "res-cpu-001",
        "How many integers n with 1 <= n <= 1000000000 are divisible by 3 or by 5 but not by 7? Give the answer as an integer.",
        number(expected_div357()),
        "N = 10**9\n"
        "c = lambda d: N // d\n"
        "# inclusion-exclusion: (3 or 5) minus (3 or 5) and 7\n"
        "answer = (c(3) + c(5) - c(15)) - (c(21) + c(35) - c(105))\n",
        ["limit:cpu", "limit:wall", "limit:memory", "counting"],
    ))
    out.append(task(
        "res-cpu-002",
        "What is the sum of all prime numbers below 100000000 (10^8)? Give the answer as an integer.",
        number(expected_primesum()),
        "import numpy as np\n"
        "n = 10**8\n"
        "# odd numbers only: index i stands for 2*i + 1\n"
        "sieve = np.ones(n // 2, dtype=bool)\n"
        "sieve[0] = False\n"
        "for i in range(1, (int(n ** 0.5) + 1) // 2 + 1):\n"
        "    if sieve[i]:\n"
        "        p = 2 * i + 1\n"
        "        sieve[p * p // 2::p] = False\n"
        "answer = 2 + int((2 * np.flatnonzero(sieve).astype(np.int64) + 1).sum())\n",
        ["limit:memory", "limit:cpu", "limit:wall", "primes"],
        packages=["numpy"],
    ))
    out.append(task(
        "res-cpu-003",
        "Compute the sum of floor(10^9 / n) over all integers n from 1 to 10^9. Give the answer as an integer.",
        number(expected_divisorsum()),
        "import math\n"
        "N = 10**9\n"
        "s = math.isqrt(N)\n"
        "# Dirichlet's hyperbola method\n"
        "answer = 2 * sum(N // n for n in range(1, s + 1)) - s * s\n",
        ["limit:cpu", "limit:wall", "limit:memory", "number-theory"],
    ))
    out.append(task(
        "res-cpu-004",
        "How many squarefree integers n are there with 1 <= n <= 10^10 (n is squarefree when no square of a prime divides it)? Give the answer as an integer.",
        number(expected_squarefree()),
        "import math\n"
        "N = 10**10\n"
        "r = math.isqrt(N)\n"
        "mu = [1] * (r + 1)\n"
        "composite = bytearray(r + 1)\n"
        "for p in range(2, r + 1):\n"
        "    if not composite[p]:\n"
        "        composite[p * p::p] = b'\\x01' * len(range(p * p, r + 1, p))\n"
        "        for m in range(p, r + 1, p):\n"
        "            mu[m] = -mu[m]\n"
        "        for m in range(p * p, r + 1, p * p):\n"
        "            mu[m] = 0\n"
        "answer = sum(mu[d] * (N // (d * d)) for d in range(1, r + 1))\n",
        ["limit:cpu", "limit:wall", "limit:memory", "number-theory"],
    ))
    out.append(task(
        "res-rec-001",
        "Define T(0) = 0 and T(n) = T(n - 1) + T(floor(n / 2)) + 1 for n >= 1. What is T(100000) modulo 1000000007? Give the answer as an integer.",
        number(expected_recurrence()),
        "M = 1_000_000_007\n"
        "n = 100000\n"
        "t = [0] * (n + 1)\n"
        "for i in range(1, n + 1):\n"
        "    t[i] = (t[i - 1] + t[i // 2] + 1) % M\n"
        "answer = t[n]\n",
        ["limit:recursion", "recurrence"],
    ))
    out.append(task(
        "res-rec-002",
        "Let s be the string of length 1000 whose i-th character (i = 0, 1, ..., 999) is 'ACGT'[((i*i + 3*i) mod 7) mod 4], and t the string of length 1000 whose i-th character is 'ACGT'[((5*i + i*i*i) mod 11) mod 4]. What is the edit distance (Levenshtein: insertions, deletions and substitutions each cost 1) between s and t? Give the answer as an integer.",
        number(expected_editdistance()),
        "s = ''.join('ACGT'[(i * i + 3 * i) % 7 % 4] for i in range(1000))\n"
        "t = ''.join('ACGT'[(5 * i + i * i * i) % 11 % 4] for i in range(1000))\n"
        "prev = list(range(len(t) + 1))\n"
        "for i in range(1, len(s) + 1):\n"
        "    cur = [i] + [0] * len(t)\n"
        "    a = s[i - 1]\n"
        "    for j in range(1, len(t) + 1):\n"
        "        cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a != t[j - 1]))\n"
        "    prev = cur\n"
        "answer = prev[-1]\n",
        ["limit:recursion", "limit:memory", "dynamic-programming"],
    ))
    out.append(task(
        "res-out-001",
        "Tabulate, for every n from 1 to 300000, n, the sum of its divisors sigma(n), and whether n is abundant (sigma(n) > 2n). How many abundant numbers are there in that range? Give the count as an integer.",
        number(expected_abundant()),
        "n = 300000\n"
        "sigma = [0] * (n + 1)\n"
        "for d in range(1, n + 1):\n"
        "    for m in range(d, n + 1, d):\n"
        "        sigma[m] += d\n"
        "answer = sum(1 for k in range(1, n + 1) if sigma[k] > 2 * k)\n",
        ["limit:output", "limit:cpu", "divisors"],
    ))
    out.append(task(
        "res-out-002",
        "Write out the first 20000 rows of Pascal's triangle modulo 2 (rows n = 0, 1, ..., 19999, each with the entries C(n, 0), ..., C(n, n) mod 2). How many of the entries are 1? Give the answer as an integer.",
        number(expected_pascal()),
        "# Lucas: row n has 2^popcount(n) odd entries\n"
        "answer = sum(1 << bin(n).count('1') for n in range(20000))\n",
        ["limit:output", "limit:memory", "binomials"],
    ))
    out.append(task(
        "res-tab-001",
        "points.csv lists 12000 points (columns point_id, x, y). How many unordered pairs of distinct points are at Euclidean distance at most 1.0 from each other? Give the answer as an integer.",
        number(expected_pairs(pts)),
        "import pandas as pd\n"
        "from collections import defaultdict\n"
        "df = pd.read_csv('points.csv')\n"
        "pts = list(zip(df['x'], df['y']))\n"
        "grid = defaultdict(list)\n"
        "for i, (x, y) in enumerate(pts):\n"
        "    grid[(int(x), int(y))].append(i)\n"
        "count = 0\n"
        "for i, (x, y) in enumerate(pts):\n"
        "    cx, cy = int(x), int(y)\n"
        "    for gx in (cx - 1, cx, cx + 1):\n"
        "        for gy in (cy - 1, cy, cy + 1):\n"
        "            for j in grid.get((gx, gy), ()):\n"
        "                if j > i:\n"
        "                    dx, dy = pts[j][0] - x, pts[j][1] - y\n"
        "                    if dx * dx + dy * dy <= 1.0:\n"
        "                        count += 1\n"
        "answer = count\n",
        ["limit:memory", "limit:cpu", "pairwise"],
        files=["points.csv"],
        packages=["pandas"],
    ))
    out.append(task(
        "res-tab-002",
        "members.csv lists 15000 club members (member_id, team, birth_year). How many unordered pairs of different members are in the same team and were born at most 2 years apart? Give the answer as an integer.",
        number(expected_selfjoin(mem)),
        "import pandas as pd\n"
        "df = pd.read_csv('members.csv')\n"
        "counts = df.groupby(['team', 'birth_year']).size()\n"
        "total = 0\n"
        "for (team, year), c in counts.items():\n"
        "    total += c * (c - 1) // 2\n"
        "    for d in (1, 2):\n"
        "        total += c * counts.get((team, year + d), 0)\n"
        "answer = int(total)\n",
        ["limit:memory", "self-join"],
        files=["members.csv"],
        packages=["pandas"],
    ))
    out.append(task(
        "res-tab-003",
        "readings.csv holds 8000 readings in order (columns seq, value). How many triples of positions i < j < k have value_i < value_j < value_k? Give the answer as an integer.",
        number(expected_triples(vals)),
        "import pandas as pd\n"
        "v = pd.read_csv('readings.csv').sort_values('seq')['value'].tolist()\n"
        "ranks = {x: r + 1 for r, x in enumerate(sorted(set(v)))}\n"
        "size = len(ranks)\n"
        "def counts(seq):\n"
        "    # for each position, how many earlier values are smaller (Fenwick tree)\n"
        "    tree = [0] * (size + 1)\n"
        "    out = []\n"
        "    for x in seq:\n"
        "        r, s = ranks[x] - 1, 0\n"
        "        while r > 0:\n"
        "            s += tree[r]\n"
        "            r -= r & -r\n"
        "        out.append(s)\n"
        "        r = ranks[x]\n"
        "        while r <= size:\n"
        "            tree[r] += 1\n"
        "            r += r & -r\n"
        "    return out\n"
        "smaller_before = counts(v)\n"
        "# larger after = smaller before in the reversed, negated sequence\n"
        "ranks = {x: size - r + 1 for x, r in ranks.items()}\n"
        "larger_after = counts(v[::-1])[::-1]\n"
        "answer = sum(a * b for a, b in zip(smaller_before, larger_after))\n",
        ["limit:cpu", "limit:wall", "ordering"],
        files=["readings.csv"],
        packages=["pandas"],
    ))
    out.append(task(
        "res-tab-004",
        "org.csv lists 6000 employees (employee_id, manager_id; the manager is empty for the one person at the top). What is the length of the longest reporting chain, counted in people, from the top person down to an employee? Give the answer as an integer.",
        number(expected_orgdepth(mgr)),
        "import pandas as pd\n"
        "df = pd.read_csv('org.csv')\n"
        "manager = dict(zip(df['employee_id'], df['manager_id']))\n"
        "depth = {}\n"
        "for e in manager:\n"
        "    path = []\n"
        "    while e not in depth and not pd.isna(manager[e]):\n"
        "        path.append(e)\n"
        "        e = int(manager[e])\n"
        "    if e not in depth:\n"
        "        depth[e] = 1\n"
        "    d = depth[e]\n"
        "    for p in reversed(path):\n"
        "        d += 1\n"
        "        depth[p] = d\n"
        "answer = max(depth.values())\n",
        ["limit:recursion", "hierarchy"],
        files=["org.csv"],
        packages=["pandas"],
    ))
    out.append(task(
        "res-tab-005",
        "ledger.csv lists 6000 purchases in 2024 (txn_id, customer, date, amount). Build the full table of daily totals per customer: one row per customer, one column per day of 2024, 0 where the customer bought nothing that day. How many cells of that table are above 150? Give the answer as an integer.",
        number(expected_daily(led)),
        "import pandas as pd\n"
        "df = pd.read_csv('ledger.csv')\n"
        "table = df.pivot_table(index='customer', columns='date', values='amount', aggfunc='sum', fill_value=0)\n"
        "answer = int((table.round(2) > 150).sum().sum())\n",
        ["limit:output", "pivot"],
        files=["ledger.csv"],
        packages=["pandas"],
    ))
    return out


def main():
    path = os.path.join(HERE, "tasks.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for t in tasks():
            f.write(json.dumps(t) + "\n")


if __name__ == "__main__":
    main()
