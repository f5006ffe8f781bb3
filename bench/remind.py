"""The cost of a reminder: `parse_when` beside bare `dateparser.parse`, and one outbox delivery (journal, fsync, send,
acknowledgement) beside a bare JSON-lines append with no fsync.

    .venv/bin/python bench/remind.py              # ~10 s
    .venv/bin/python bench/remind.py --n 2000
"""
import argparse, json, os, sys, tempfile, time
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine
import dateparser
from multis.chat.when import parse_when
from multis.chat.outbox import Outbox

PHRASES = ['tomorrow at 9 call Alice', 'in 20 minutes check the oven', "on 3 December Bob's birthday",
           'every weekday at 7:30 stretch', 'me to call Alice tomorrow at 9', 'Dec 3 at 10am dentist',
           'every Monday at 8 plan the week', 'friday 5pm beer']

def per_call(fn, n:int)->float:
    "Seconds per call of fn(i), over n calls"
    t = time.perf_counter()
    for i in range(n): fn(i)
    return (time.perf_counter() - t) / n

def main(n:int=500):
    print(machine())
    tz, now = 'Europe/Berlin', datetime(2026, 11, 24, 10, 15, tzinfo=ZoneInfo('Europe/Berlin')).timestamp()
    base = datetime(2026, 11, 24, 10, 15)
    parse_when(PHRASES[0], now, tz); dateparser.parse('tomorrow', languages=['en'], settings={'RELATIVE_BASE': base})   # load the languages once
    ours = per_call(lambda i: parse_when(PHRASES[i % len(PHRASES)], now, tz), n)
    bare = per_call(lambda i: dateparser.parse(PHRASES[i % len(PHRASES)].split(' ', 2)[0], languages=['en'], settings={'RELATIVE_BASE': base}), n)
    print(f"parse_when: {ours*1e3:.2f} ms a phrase; bare dateparser.parse (English) of one word: {bare*1e3:.2f} ms; ratio {ours/bare:.1f}x")
    with tempfile.TemporaryDirectory() as d:
        ob = Outbox(d)
        def deliver(i):
            ob.put(f'j{i}@1', 'telegram', '5', f'Reminder (j{i}): call Alice')
            ob.deliver(lambda p, c, t: [i])
        ours = per_call(deliver, n)
        path = Path(d)/'bare.jsonl'
        def bare_append(i):
            with open(path, 'a') as f: f.write(json.dumps(dict(key=f'j{i}@1', text='call Alice')) + '\n')
        bare = per_call(bare_append, n)
        lines = (Path(d)/'outbox'/'journal.jsonl').read_text().count('\n')
    print(f"outbox put + send + ack (3 journal records, 3 fsyncs): {ours*1e3:.2f} ms a delivery ({lines} lines); "
          f"bare append without fsync: {bare*1e3:.3f} ms; ratio {ours/bare:.0f}x")

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--n', type=int, default=500, help='calls of each')
    main(ap.parse_args().n)
