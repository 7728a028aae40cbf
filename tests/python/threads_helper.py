"""in_threads: one body on N threads, the first error raised in the caller. The Python tests import
it from here (their folder is on sys.path); tests/python/launch/worker.py and bench/peers/ put this
folder on sys.path first."""
import threading


def in_threads(n, body):
    """body(i) on thread i for i < n, all started, then all joined; the list of what each returned,
    or the first exception of a thread re-raised."""
    errors, out = [], [None] * n

    def run(i):
        try:
            out[i] = body(i)
        except BaseException as e:  # noqa: BLE001 - raised below, in the calling thread
            errors.append(e)
    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]
    return out
