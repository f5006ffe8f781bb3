"The audit log: content of the lines, redaction of secrets, permissions, whole lines from concurrent processes"
import json, logging, os, re, stat, subprocess, sys, textwrap
from datetime import datetime, timezone
from pathlib import Path
import pytest
from multis.governance.audit import EVENTS, REDACTED, audit, audit_path, read_audit, redact, redact_text

T = datetime(2026, 3, 1, 9, 30, tzinfo=timezone.utc).timestamp()
ISO = re.compile(r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z')
ANTHROPIC = 'sk-ant-api03-' + 'Zq9Xw8Vu7Ts6' * 7 + '-AbCdEf'
OPENAI = 'sk-proj-' + 'a1B2c3D4e5F6' * 4
BOT = '7123456789:AAH' + 'kLmNoPqRsTuV' * 3
BEARER = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.c2lnbmF0dXJl'

def lines(home):
    return (Path(home)/'audit.log').read_text(encoding='utf-8').splitlines()

def test_events_are_the_documented_ones():
    assert set(EVENTS) >= {'pair', 'pair_failed', 'unpair', 'exec', 'read', 'index', 'search', 'ask', 'mode',
                           'lockout', 'rate_limit'}

def test_lines_hold_the_events(tmp_path):
    audit('pair', home=tmp_path, now=T, user='42', chat='42', platform='telegram', role='owner')
    audit('exec', home=tmp_path, now=T+1, user='42', command='rm -rf x', allowed=False, reason='`rm` is not allowed')
    audit('exec', home=tmp_path, now=T+2, user='42', command='ls', allowed=True, exit_code=0)
    audit('read', home=tmp_path, now=T+3, user='42', path='~/Documents/a.md', allowed=True, chars=120)
    audit('index', home=tmp_path, now=T+4, user='42', path=Path('/docs/report.pdf'), scope='kb', chunks=12)
    audit('search', home=tmp_path, now=T+5, user='7', query='flat in Porto', scope=['kb', 'user:7'], hits=3)
    audit('ask', home=tmp_path, now=T+6, user='7', question='Where is the flat?', sources=2)
    audit('mode', home=tmp_path, now=T+7, user='42', chat='!room:beeper.local', mode='business')
    audit('unpair', home=tmp_path, now=T+8, user='7')
    raw = lines(tmp_path)
    assert len(raw) == 9
    recs = [json.loads(l) for l in raw]
    assert all(list(r)[:2] == ['ts', 'event'] and ISO.fullmatch(r['ts']) for r in recs)
    assert [r['event'] for r in recs] == ['pair', 'exec', 'exec', 'read', 'index', 'search', 'ask', 'mode', 'unpair']
    assert recs[0] == {'ts': '2026-03-01T09:30:00.000Z', 'event': 'pair', 'user': '42', 'chat': '42',
                       'platform': 'telegram', 'role': 'owner'}
    assert (recs[1]['allowed'], recs[1]['reason'], recs[1]['command']) == (False, '`rm` is not allowed', 'rm -rf x')
    assert (recs[2]['allowed'], recs[2]['exit_code']) == (True, 0)
    assert recs[4]['path'] == '/docs/report.pdf' and recs[5]['scope'] == ['kb', 'user:7']
    assert recs[7]['mode'] == 'business' and recs[8]['ts'] == '2026-03-01T09:30:08.000Z'
    assert read_audit(tmp_path) == recs
    assert [r['ts'] for r in read_audit(tmp_path, event='exec')] == [recs[1]['ts'], recs[2]['ts']]
    assert [r['event'] for r in read_audit(tmp_path, event=('pair', 'unpair'), limit=1)] == ['unpair']

def test_secrets_never_reach_the_file(tmp_path):
    rec = audit('exec', home=tmp_path, now=T, user='42',
                command=f'curl -H "Authorization: Bearer {BEARER}" https://api.telegram.org/bot{BOT}/getMe',
                allowed=False, reason='`curl` is not allowed')
    audit('ask', home=tmp_path, now=T, user='42', question=f'why is {ANTHROPIC} rejected? also tried {OPENAI}')
    audit('search', home=tmp_path, now=T, query='ANTHROPIC_API_KEY=abc123 DB_PASSWORD="two words" mode=fast')
    audit('pair', home=tmp_path, now=T, user='42', password='hunter2', api_key='plain-value', bot_token=BOT,
          headers={'Authorization': f'Bearer {BEARER}', 'Accept': 'text/plain'}, pairing_code='TIGER-42',
          note='login at https://bob:s3cretpw@example.com and AKIAABCDEFGHIJKLMNOP')
    text = (tmp_path/'audit.log').read_text()
    for secret in (ANTHROPIC, OPENAI, BOT, BEARER, 'hunter2', 'plain-value', 'abc123', 'two words', 'TIGER-42',
                   's3cretpw', 'AKIAABCDEFGHIJKLMNOP', BOT.split(':')[1]):
        assert secret not in text, secret
    assert REDACTED in rec['command'] and 'not allowed' in rec['reason']
    pair = read_audit(tmp_path, event='pair')[0]
    assert (pair['password'], pair['api_key'], pair['bot_token']) == (REDACTED, REDACTED, REDACTED)
    assert pair['headers'] == {'Authorization': REDACTED, 'Accept': 'text/plain'}
    assert pair['note'] == f'login at https://bob:{REDACTED}@example.com and {REDACTED}'
    assert read_audit(tmp_path, event='search')[0]['query'].endswith('mode=fast')
    assert 'https://api.telegram.org/bot[redacted]/getMe' in rec['command']

def test_redaction_keeps_ordinary_text():
    for text in ('What did I decide at 10:30 about the flat?', 'ls -l ~/Documents', 'search for sk-learn docs',
                 'order 1234567:abc', 'the tokenizer splits words'):
        assert redact_text(text) == text
    assert redact({'user': 1, 'ok': True, 'n': None, 'x': 1.5}) == {'user': 1, 'ok': True, 'n': None, 'x': 1.5}
    assert redact({'nested': {'Secret': 'x', 'list': [{'auth': 'y'}]}}) == {'nested': {'Secret': REDACTED, 'list': [{'auth': REDACTED}]}}

def test_permissions(tmp_path):
    old = os.umask(0)
    try: audit('pair', home=tmp_path/'h', user='1')
    finally: os.umask(old)
    assert stat.S_IMODE((tmp_path/'h'/'audit.log').stat().st_mode) == 0o600
    p = tmp_path/'wide'/'audit.log'
    p.parent.mkdir(); p.write_text(''); p.chmod(0o644)
    audit('pair', home=p.parent, user='1')
    assert stat.S_IMODE(p.stat().st_mode) == 0o600

def test_default_home(home):
    audit('mode', mode='personal', user='3')
    assert audit_path() == home/'audit.log'
    assert read_audit()[0]['mode'] == 'personal'

def test_bad_event_names_raise(tmp_path):
    for bad in ('', 'Exec', 'exec; rm', 'a b', None):
        with pytest.raises(ValueError): audit(bad, home=tmp_path)
    assert not (tmp_path/'audit.log').exists()
    assert audit('new_event', home=tmp_path)['event'] == 'new_event'

def test_a_failed_write_does_not_raise(tmp_path, caplog):
    (tmp_path/'home').write_text('not a folder')
    with caplog.at_level(logging.WARNING, logger='multis.governance.audit'):
        rec = audit('index', home=tmp_path/'home', path='/a.pdf', scope='kb')
    assert rec['scope'] == 'kb'
    assert any('cannot write' in r.getMessage() for r in caplog.records)

def test_read_audit_skips_a_torn_line(tmp_path):
    audit('pair', home=tmp_path, user='1')
    with open(tmp_path/'audit.log', 'a') as f: f.write('{"ts": "2026-\n')
    audit('unpair', home=tmp_path, user='1')
    assert [r['event'] for r in read_audit(tmp_path)] == ['pair', 'unpair']
    assert read_audit(tmp_path/'nothing') == []

WRITER = textwrap.dedent('''
    import sys
    from multis.governance.audit import audit
    home, n = sys.argv[1], int(sys.argv[2])
    sys.stdin.readline()
    for i in range(300):
        long = i % 7 == 0
        audit('exec', home=home, user=n, i=i, command=('cat ' + 'x' * 9000) if long else f'ls {i}',
              reason=('y' * 5000) if long else 'ok', api_key='k' * 20)
''')

def test_concurrent_processes_write_whole_lines(tmp_path):
    procs = [subprocess.Popen([sys.executable, '-c', WRITER, str(tmp_path), str(n)], stdin=subprocess.PIPE)
             for n in range(4)]
    for p in procs: p.stdin.write(b'go\n'); p.stdin.flush()
    for p in procs: p.stdin.close()
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    raw = lines(tmp_path)
    assert len(raw) == 1200
    recs = [json.loads(l) for l in raw]
    assert sorted((r['user'], r['i']) for r in recs) == [(n, i) for n in range(4) for i in range(300)]
    long = [r for r in recs if r['i'] % 7 == 0]
    assert long and all(r['command'] == 'cat ' + 'x'*9000 and r['reason'] == 'y'*5000 for r in long)
    assert all(r['api_key'] == REDACTED for r in recs)
    assert max(len(l) for l in raw) > 4096

def test_service_tokens_and_embedding_key_never_reach_the_log(tmp_path):
    "issue 14: the tokens are the keys of service.tokens; a config shown as text or as a dict must not leak them"
    tok, emb = 'Zx9-owner-token_' + 'q'*20, 'emb-' + 'k'*24
    cfg = {'service': {'port': 5858, 'tokens': {tok: {'read': ['kb'], 'write': ['user:7']}}},
           'embeddings': {'provider': 'openai', 'api_key': emb}}
    audit('config', tmp_path, changed=cfg, text=json.dumps(cfg), line=f"service.tokens={{'{tok}': 1}} embeddings.api_key={emb}",
          tokens=[tok])
    raw = audit_path(tmp_path).read_text()
    assert tok not in raw and emb not in raw
    rec = read_audit(tmp_path, 'config')[0]
    assert rec['changed']['service']['port'] == 5858 and rec['changed']['embeddings']['provider'] == 'openai'
