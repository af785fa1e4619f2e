# A multiprocessing.Pool whose workers print: ipykernel carries forked
# children's output over its own loopback (benches/README.md, "Notebooks
# in the jail"). The last line prints the sum and the seconds the pool took.
import time, multiprocessing as mp
def work(i):
    print('worker', i, flush=True)
    return i * i
t = time.time()
with mp.Pool(4) as p:
    r = p.map(work, range(10))
print(sum(r), round(time.time() - t, 3))
