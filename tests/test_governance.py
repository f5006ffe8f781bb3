"Governance for /exec and /read: a table of bypass attempts, allowed commands really running, caps, confirmations"
import json, os, stat, subprocess, time
from pathlib import Path
import pytest
from multis.core import MultisError
from multis.config import ConfigError
from multis.governance.rules import (DEFAULT_GOVERNANCE, SAFE_ENV_VARS, ExecResult, Governance, GovernanceError,
                                     NeedsConfirmation, Plan, load_governance, safe_env)
from multis.governance.exec import Confirmations   # also gives Governance.check and Governance.run

@pytest.fixture
def box(tmp_path, monkeypatch):
    "A fake user home (with ~/.ssh), a documents root, a folder outside it, and a multis home; HOME points at the fake"
    user = tmp_path/'userhome'
    (user/'.ssh').mkdir(parents=True)
    (user/'.ssh'/'id_rsa').write_text('PRIVATE KEY')
    monkeypatch.setenv('HOME', str(user))
    root, outside, mhome = tmp_path/'docs', tmp_path/'outside', tmp_path/'mhome'
    (root/'sub').mkdir(parents=True); outside.mkdir(); mhome.mkdir()
    (root/'notes.txt').write_text('alpha\nbeta\ngamma\n')
    (root/'sub'/'deep.md').write_text('# Deep\n')
    (outside/'secret.txt').write_text('TOP SECRET')
    (root/'link').symlink_to(outside/'secret.txt')
    (root/'dirlink').symlink_to(outside)
    (mhome/'config.json').write_text('{"llm": {"api_key": "sk-ant-xyz"}}')
    (mhome/'.env').write_text('ANTHROPIC_API_KEY=sk-ant-xyz\n')
    monkeypatch.setenv('MULTIS_HOME', str(mhome))
    return dict(root=root, outside=outside, mhome=mhome, user=user, tmp=tmp_path)

@pytest.fixture
def gov(box):
    "The default rules with the documents root and the multis home as allowed folders (the root first: the cwd)"
    return Governance({'allowed_roots': [str(box['root']), str(box['mhome'])]}, home=box['mhome'])

def fill(text, box):
    "`text` with {root} and {mhome} replaced by those folders"
    return text.replace('{root}', str(box['root'])).replace('{mhome}', str(box['mhome']))

def custom(box, **rules):
    "Governance with the given rules over the documents root"
    return Governance({'allowed_roots': [str(box['root'])], **rules}, home=box['mhome'])

# Each row: a command that must be refused, and a piece of the reason it must give.
BYPASSES = [
    ('rm -rf notes.txt', '`rm` is not allowed'),
    ('rm -rf /', '`rm` is not allowed'),
    ('ls; rm x', '`;` joins commands and `rm` is not allowed'),
    ('ls;rm x', '`;` joins commands and `rm` is not allowed'),
    ('ls && rm x', '`&&` joins commands and `rm` is not allowed'),
    ('ls || rm x', '`||` joins commands and `rm` is not allowed'),
    ('ls | sh', '`|` joins commands and `sh` is not allowed'),
    ('cat notes.txt | bash', '`|` joins commands and `bash` is not allowed'),
    ('git status; rm x', '`rm` is not allowed'),
    ('echo `rm x`', 'backticks'),
    ("echo '`rm x`'", 'backticks'),
    ('echo $(rm x)', 'command substitution `$(`'),
    ('echo "$(rm x)"', 'command substitution `$(`'),
    ('cat${IFS}/etc/passwd', 'variable expansion `${`'),
    ('echo $HOME', 'variable `$HOME`'),
    ('echo hi > notes.txt', 'redirection `>` is not allowed'),
    ('echo hi >> notes.txt', 'redirection `>>` is not allowed'),
    ('cat < /etc/shadow', 'redirection `<` is not allowed'),
    ('cat notes.txt 2>&1', 'redirection `>&`'),
    ('cat <(rm x)', 'redirection'),
    ('ls &', 'running in the background'),
    ('ls & rm x', 'running in the background'),
    ('(rm x)', 'subshells'),
    ('ls |& rm x', 'operator `|&` is not allowed'),
    ('ls ;; ls', 'operator `;;` is not allowed'),
    ('rm *', '`rm` is not allowed'),
    ('* notes.txt', 'glob `*` is not allowed as a program'),
    ('cat ../*', 'outside the allowed folders'),
    ("bash -c 'rm x'", '`bash -c` runs a command that is not allowed: `rm` is not allowed'),
    ("bash -lc 'ls; rm x'", '`bash -c` runs a command that is not allowed: `;` joins commands and `rm`'),
    ("sh -c 'rm x'", '`sh -c` runs a command that is not allowed'),
    ("zsh -c 'rm x'", '`zsh -c` runs a command that is not allowed'),
    ("sh -c 'ls'", '`sh` is not allowed'),
    ('bash script.sh', '`bash` is not allowed'),
    ('python -c "import os; os.remove(\'x\')"', '`python -c` runs code that cannot be checked'),
    ('python3 -c "print(1)"', '`python3 -c` runs code that cannot be checked'),
    ('python3.12 -Ic "print(1)"', '`python3.12 -c` runs code'),
    ('python3 -m http.server', '`python3 -m` runs code'),
    ('python3 script.py', '`python3` is not allowed'),
    ("perl -e 'unlink q(x)'", '`perl -e` runs code'),
    ("node -e 'x'", '`node -e` runs code'),
    ('env rm x', '`env` wraps a command that is not allowed: `rm` is not allowed'),
    ('env -i rm x', '`env` wraps a command that is not allowed: `rm` is not allowed'),
    ('env FOO=1 rm x', '`rm` is not allowed'),
    ("env -S 'rm x'", 'cannot tell what `env` runs'),
    ('env', '`env` is not allowed'),
    ('env ls', '`env` is not allowed'),
    ('nice rm x', '`nice` wraps a command that is not allowed: `rm` is not allowed'),
    ('nice -n 5 rm x', '`rm` is not allowed'),
    ('timeout 1 rm x', '`timeout` wraps a command that is not allowed: `rm` is not allowed'),
    ('timeout -s KILL 1 rm x', '`rm` is not allowed'),
    ('xargs rm', '`xargs` wraps a command that is not allowed: `rm` is not allowed'),
    ('xargs -0 -n1 rm', '`rm` is not allowed'),
    ('nohup rm x', '`nohup` wraps a command that is not allowed'),
    ('sudo ls', '`sudo` is not allowed'),
    ('sudo rm x', '`sudo` wraps a command that is not allowed: `rm` is not allowed'),
    ('sudo -u root rm x', '`rm` is not allowed'),
    ('command rm x', '`command` wraps a command that is not allowed'),
    ('exec rm x', '`exec` wraps a command that is not allowed'),
    ('busybox rm x', '`busybox` wraps a command that is not allowed'),
    ("busybox sh -c 'rm x'", '`sh -c` runs a command that is not allowed'),
    ('env nice timeout 1 sh -c "rm x"', '`rm` is not allowed'),
    ('/bin/rm x', '`rm` is not allowed'),
    ('/usr/bin/env rm x', '`rm` is not allowed'),
    ('./rm x', '`rm` is not allowed'),
    ('/bin/ls', 'give the program by its name (`ls`), not by a path'),
    ('./ls', 'not by a path'),
    ('RM x', '`RM` is not allowed'),
    ('Rm x', '`Rm` is not allowed'),
    ('cat ../../etc/passwd', 'path ../../etc/passwd is outside the allowed folders'),
    ('cat /etc/passwd', 'path /etc/passwd is outside the allowed folders'),
    ('cat sub/../../outside/secret.txt', 'outside the allowed folders'),
    ('ls ..', 'path .. is outside the allowed folders'),
    ('ls /', 'path / is outside the allowed folders'),
    ('ls ~', 'path ~ is outside the allowed folders'),
    ('cat ~/.ssh/id_rsa', 'path ~/.ssh/id_rsa is in a denied folder'),
    ('cat link', 'path link is outside the allowed folders'),
    ('cat dirlink/secret.txt', 'path dirlink/secret.txt is outside the allowed folders'),
    ('grep -r SECRET dirlink', 'outside the allowed folders'),
    ('cat {mhome}/config.json', 'config.json is in a denied folder'),
    ('cat ../mhome/.env', 'path ../mhome/.env is in a denied folder'),
    ('ls ../mhome', 'folder ../mhome holds a denied folder'),
    ("echo 'unbalanced", 'cannot parse the command: no closing quotation'),
    ('echo "unbalanced', 'cannot parse the command'),
    ('echo trailing\\', 'cannot parse the command'),
    ('ls\nrm x', 'line breaks are not allowed'),
    ('ls\rrm x', 'line breaks are not allowed'),
    ('find . -exec rm {} \\;', 'option `-exec` of `find` is not allowed'),
    ('find . -execdir rm {} +', 'option `-execdir` of `find`'),
    ('find . -ok rm {} \\;', 'option `-ok` of `find`'),
    ('find . -delete', 'option `-delete` of `find`'),
    ('find -delete', 'option `-delete` of `find`'),
    ('find . -fprint list.txt', 'option `-fprint` of `find`'),
    ('find -L . -name x', 'option `-L` of `find`'),
    ('grep -R SECRET .', 'option `-R` of `grep`'),
    ('grep -rnR SECRET .', 'option `-R` of `grep`'),
    ('grep --dereference-rec SECRET .', 'option `--dereference-recursive` of `grep`'),
    ('sort -o out.txt notes.txt', 'option `-o` of `sort`'),
    ('sort --out=out.txt notes.txt', 'option `--output` of `sort`'),
    ('sort --compress-program=sh notes.txt', 'option `--compress-program` of `sort`'),
    ('wc --files0-from=list', 'option `--files0-from` of `wc`'),
    ('sort --files0=list', 'option `--files0-from` of `sort`'),
    ('uniq notes.txt out.txt', '`uniq` with more than 1 file'),
    ('ls -RL', 'option `-L` of `ls`'),
    ('diff -r sub .', 'option `-r` of `diff`'),
    ('md5sum -c sums.txt', 'option `-c` of `md5sum`'),
    ('cat dirlink/*', 'outside the allowed folders'),
    ('wc -l *', 'path dirlink is outside the allowed folders'),
    ('date -f ../outside/secret.txt', 'outside the allowed folders'),
    ('sort -T /tmp notes.txt', 'path /tmp is outside'),
    ('realpath --relative-to=/ notes.txt', 'path / is outside'),
    ('\\rm x', '`rm` is not allowed'),
    ("r''m x", '`rm` is not allowed'),
    ('"rm" x', '`rm` is not allowed'),
    ('curl http://example.com', '`curl` is not allowed'),
    ('wget http://example.com', '`wget` is not allowed'),
    ('ssh host', '`ssh` is not allowed'),
    ('scp notes.txt host:', '`scp` is not allowed'),
    ('nc -l 4444', '`nc` is not allowed'),
    ('dd if=/dev/zero of=notes.txt', '`dd` is not allowed'),
    ('mkfs.ext4 /dev/sda', '`mkfs.ext4` is not allowed'),
    ('chmod 777 notes.txt', '`chmod` is not allowed'),
    ('chown root notes.txt', '`chown` is not allowed'),
    ('shutdown now', '`shutdown` is not allowed'),
    ('sed -i s/a/b/ notes.txt', '`sed` is not allowed'),
    ('tee notes.txt', '`tee` is not allowed'),
    ('ｒｍ x', '`ｒｍ` is not allowed'),
    ('\u0441at notes.txt', '`\u0441at` is not allowed'),
    ('l\u200bs', 'invisible character U+200B'),
    ('ls \u202enotes.txt', 'U+202E'),
    ('', 'empty command'),
    ('   ', 'empty command'),
    ('echo ' + 'a'*5000, 'command too long'),
    ('ls\x00', 'control or invisible character U+0000'),
    ('cat notes.txt\x00../x', 'U+0000'),
    ('ls --output=/etc/x', 'path /etc/x is outside the allowed folders'),
    ('cat -- /etc/passwd', 'outside the allowed folders'),
    ('grep -f/etc/shadow x notes.txt', 'path /etc/shadow is in a denied folder'),
    ('grep --file=../outside/secret.txt x notes.txt', 'outside the allowed folders'),
    ('head -n1 -- ../outside/secret.txt', 'outside the allowed folders'),
    ('X=1 ls', 'setting variables (`X=1`) is not allowed'),
    ('LD_PRELOAD=/tmp/x.so ls', 'setting variables'),
    ('ls ;', '`;` needs a command after it'),
    ('&& ls', '`&&` needs a command before it'),
    ("echo ok && bash -c 'ls | rm x'", '`&&` joins commands and `bash -c` runs a command'),
]

def test_the_table_is_large():
    assert len(BYPASSES) >= 40
    assert len({c for c, _ in BYPASSES}) == len(BYPASSES)

@pytest.mark.parametrize('command,reason', BYPASSES, ids=[repr(c)[:40] for c, _ in BYPASSES])
def test_bypass_is_refused(gov, box, command, reason):
    with pytest.raises(GovernanceError) as e: gov.check(fill(command, box))
    assert reason in str(e.value), str(e.value)
    assert e.value.reason == str(e.value)

def test_refused_commands_never_run(gov, box):
    for cmd in ('ls; cat /etc/passwd', 'cat notes.txt | tee copy.txt', 'echo hi > made.txt', "sh -c 'touch made.txt'"):
        with pytest.raises(GovernanceError): gov.run(cmd)
    assert sorted(o.name for o in box['root'].iterdir()) == ['dirlink', 'link', 'notes.txt', 'sub']
    assert (box['root']/'notes.txt').read_text() == 'alpha\nbeta\ngamma\n'

ALLOWED = [
    ('echo hello   world', 'hello world\n'),
    ("echo 'a;b' \"c|d\" e\\&f '*' '~'", 'a;b c|d e&f * ~\n'),
    ('echo /etc/passwd', '/etc/passwd\n'),
    ('cat notes.txt', 'alpha\nbeta\ngamma\n'),
    ('cat "notes.txt"', 'alpha\nbeta\ngamma\n'),
    ('cat {root}/notes.txt', 'alpha\nbeta\ngamma\n'),
    ('cat notes.txt | wc -l', '3\n'),
    ('cat notes.txt | grep -e a | sort -r | head -n 1', 'gamma\n'),
    ('ls', 'dirlink\nlink\nnotes.txt\nsub\n'),
    ('ls sub', 'deep.md\n'),
    ('ls && echo ok', 'dirlink\nlink\nnotes.txt\nsub\nok\n'),
    ('false || echo fallback', 'fallback\n'),
    ('false && echo no || echo yes', 'yes\n'),
    ('true; echo after', 'after\n'),
    ('echo *.txt', 'notes.txt\n'),
    ('echo s?b/*.md', 'sub/deep.md\n'),
    ("find . -name '*.md'", './sub/deep.md\n'),
    ('echo a/b/c | cut -d/ -f2', 'b\n'),
    ('grep -e alpha notes.txt sub/deep.md', 'notes.txt:alpha\n'),
    ('head -n 1 sub/deep.md', '# Deep\n'),
    ('pwd', '{root}\n'),
]

@pytest.mark.parametrize('command,output', ALLOWED, ids=[c for c, _ in ALLOWED])
def test_allowed_commands_run(gov, box, command, output):
    res = gov.run(fill(command, box))
    assert res == ExecResult(True, output.replace('{root}', str(box['root'].resolve())), 0, '', False)

def test_plan(gov):
    p = gov.check('cat notes.txt | wc -l && echo done')
    assert isinstance(p, Plan)
    assert (p.argv_list, p.operators, p.needs_confirm) == ([['cat', 'notes.txt'], ['wc', '-l'], ['echo', 'done']], ['|', '&&'], False)
    assert Path(p.cwd) == Path(gov.cwd)

def test_failures_come_back_in_the_result(gov, box):
    r = gov.run('cat missing.txt')
    assert (r.ok, r.exit_code, r.reason, r.truncated) == (False, 1, 'exit code 1', False)
    assert 'missing.txt' in r.output
    r = gov.run('false && echo never')
    assert (r.ok, r.output, r.exit_code) == (False, '', 1)
    r = custom(box, allowlist=['no-such-program-xyz']).run('no-such-program-xyz --help')
    assert (r.ok, r.exit_code, r.reason) == (False, None, '`no-such-program-xyz` is not installed')

def test_timeout_kills_the_process_group(box):
    g = custom(box, allowlist=['bash', 'sleep', 'echo'], denylist=[], timeout_seconds=0.5)
    t0 = time.monotonic()
    r = g.run("bash -c 'sleep 7.31; echo done'")
    assert time.monotonic() - t0 < 3
    assert (r.ok, r.exit_code, r.reason) == (False, None, 'timed out after 0.5 s')
    assert 'done' not in r.output
    for _ in range(40):
        ps = subprocess.run(['ps', '-eo', 'args'], capture_output=True, text=True).stdout
        if 'sleep 7.31' not in ps: break
        time.sleep(0.05)
    assert 'sleep 7.31' not in ps

def test_timeout_covers_the_whole_line(box):
    g = custom(box, allowlist=['sleep', 'echo'], timeout_seconds=0.6)
    t0 = time.monotonic()
    r = g.run('sleep 0.4; sleep 0.4; echo late')
    assert time.monotonic() - t0 < 2.5
    assert (r.ok, r.reason, 'late' in r.output) == (False, 'timed out after 0.6 s', False)

def test_output_cap(box):
    g = custom(box, max_output_chars=100)
    t0 = time.monotonic()
    r = g.run('seq 1 5000000')
    assert time.monotonic() - t0 < 5
    assert (r.ok, r.truncated, r.exit_code, len(r.output)) == (True, True, None, 100)
    assert r.output.startswith('1\n2\n3\n') and r.reason == 'output cut at 100 characters'
    r = custom(box, max_output_chars=20).run('cat notes.txt; cat notes.txt')
    assert (r.truncated, r.output) == (True, 'alpha\nbeta\ngamma\nalp')

def test_environment_has_no_secrets(box, monkeypatch):
    secrets = {'MY_SECRET_TOKEN': 'tok-123456', 'ANTHROPIC_API_KEY': 'sk-ant-api03-secret', 'OPENAI_API_KEY': 'sk-proj-x1',
               'TELEGRAM_BOT_TOKEN': '123456:ABCdef', 'AWS_SECRET_ACCESS_KEY': 'aws-secret', 'DB_PASSWORD': 'hunter2',
               'SOMETHING_ELSE': 'plain'}
    for k, v in secrets.items(): monkeypatch.setenv(k, v)
    monkeypatch.setenv('PATH', '.:' + os.environ['PATH'])
    r = custom(box, allowlist=['printenv']).run('printenv')
    assert r.ok
    names = {line.split('=', 1)[0] for line in r.output.splitlines()}
    assert names <= set(SAFE_ENV_VARS) and 'PATH' in names
    for k, v in secrets.items(): assert k not in r.output and v not in r.output
    assert '.' not in dict(l.split('=', 1) for l in r.output.splitlines())['PATH'].split(':')
    assert set(safe_env({'A_KEY': '1', 'HOME': '/h'})) == {'HOME', 'PATH'}

def test_confirm_list_flow(gov, box):
    with pytest.raises(NeedsConfirmation) as e: gov.run('mkdir newdir')
    assert e.value.cmdline == 'mkdir newdir' and '`mkdir` is on the confirm list' in str(e.value)
    assert not (box['root']/'newdir').exists()
    c = Confirmations(ttl=120)
    assert c.request('chat-1', 'mkdir newdir', now=1000) == 'Run `mkdir newdir`? Reply yes within 2 minutes.'
    assert c.answer('chat-2', 'yes', now=1001) is None          # another chat cannot answer
    assert c.pending('chat-1', now=1001) == 'mkdir newdir'
    cmd = c.answer('chat-1', 'YES', now=1100)
    assert cmd == 'mkdir newdir' and c.pending('chat-1', now=1100) is None
    assert gov.run(cmd, confirmed=True).ok and (box['root']/'newdir').is_dir()
    assert c.answer('chat-1', 'yes', now=1101) is None           # used once

def test_confirmations_expire_and_cancel():
    c = Confirmations(ttl=120)
    c.request(5, 'git pull', now=0)
    assert c.pending(5, now=120) == 'git pull'
    assert c.answer(5, 'y', now=121) is None and c.pending(5, now=0) is None
    c.request(5, 'git pull', now=200)
    assert c.answer(5, 'no', now=201) is None and c.pending(5, now=202) is None
    c.request(5, 'git pull', now=300)
    assert c.answer(5, 'what is the weather?', now=301) is None and c.answer(5, 'yes', now=302) is None

def test_confirmed_commands_are_still_checked(gov):
    for cmd, why in [('mkdir ../escape', 'outside the allowed folders'), ('cp notes.txt ../outside/x', 'outside'),
                     ('mv link ../x', 'path link is outside'), ('git log; rm x', '`rm` is not allowed')]:
        with pytest.raises(GovernanceError, match=None) as e: gov.run(cmd, confirmed=True)
        assert why in str(e.value)

def test_wrappers_allowed_by_the_owner(box):
    g = custom(box, allowlist=DEFAULT_GOVERNANCE['allowlist'] + ['nice', 'timeout', 'xargs', 'env'], denylist=['rm'])
    assert g.run('nice -n 5 cat notes.txt').output == 'alpha\nbeta\ngamma\n'
    assert g.run('timeout 5 head -n 1 notes.txt').output == 'alpha\n'
    assert g.run('env -i FOO=1 echo hi').output == 'hi\n'
    for cmd, why in [('nice cat ../outside/secret.txt', 'outside the allowed folders'), ('timeout 5 rm x', '`rm` is not allowed'),
                     ('env -C /etc ls', 'path /etc is outside'), ('xargs ls', 'takes its arguments from its input'),
                     ('nice nice nice nice nice nice ls', 'too many nested wrappers'), ('nice python3 -c x', '`python3 -c`')]:
        with pytest.raises(GovernanceError) as e: g.check(cmd)
        assert why in str(e.value)

def test_denied_folder_inside_an_allowed_one(box):
    (box['root']/'private').mkdir()
    (box['root']/'private'/'diary.txt').write_text('dear diary')
    g = custom(box, denied_roots=[str(box['root']/'private')])
    for cmd, why in [('cat private/diary.txt', 'path private/diary.txt is in a denied folder'),
                     ('grep -r diary', 'the working folder holds a denied folder'),
                     ('grep -r diary .', 'folder . holds a denied folder'), ('ls', 'the working folder holds'),
                     ('find . -name x', 'folder . holds a denied folder'), ('cat pri*/*', 'in a denied folder')]:
        with pytest.raises(GovernanceError) as e: g.check(cmd)
        assert why in str(e.value)
    assert g.run('grep -r alpha sub notes.txt').output == 'notes.txt:alpha\n'

def test_glob_limits(box):
    many = box['root']/'many'
    many.mkdir()
    for i in range(1001): (many/f'f{i}.txt').touch()
    g = custom(box)
    with pytest.raises(GovernanceError, match='matches more than 1000 paths'): g.check('ls many/*')
    assert g.check('ls many/f1?.txt').argv_list[0][1:] == [f'many/f{i}.txt' for i in range(10, 20)]
    assert g.check('ls nothing*').argv_list == [['ls', 'nothing*']]

def test_read(box, gov):
    assert gov.read('notes.txt') == 'alpha\nbeta\ngamma\n'
    assert gov.read(' sub/deep.md ') == '# Deep\n'
    assert gov.read(str(box['root']/'notes.txt')) == 'alpha\nbeta\ngamma\n'
    assert gov.read('.') == 'dirlink/\nlink\nnotes.txt\nsub/'
    assert gov.read('notes.txt', max_chars=5) == 'alpha\n… (cut at 5 characters of 17 bytes)'
    (box['root']/'bin.dat').write_bytes(b'\x00\x01\x02')
    (box['root']/'latin.txt').write_bytes('caf\xe9'.encode('latin-1'))
    for path, why in [('bin.dat', 'bin.dat is not a text file'), ('latin.txt', 'is not a text file'),
                      ('link', 'path link is outside the allowed folders'), ('../outside/secret.txt', 'outside'),
                      ('dirlink', 'outside'), ('~/.ssh/id_rsa', 'path ~/.ssh/id_rsa is in a denied folder'),
                      ('../mhome/config.json', 'in a denied folder'), ('/etc/passwd', 'outside'),
                      ('missing.md', 'no such file: missing.md'), ('', 'which file'), ('a\x00b', 'control or invisible characters')]:
        with pytest.raises(GovernanceError) as e: gov.read(path)
        assert why in str(e.value), (path, str(e.value))

def test_read_under_the_default_folders(box, tmp_path):
    docs = box['user']/'Documents'
    docs.mkdir()
    (docs/'plan.md').write_text('# Plan\n')
    g = load_governance(box['mhome'])
    assert g.cwd == docs.resolve()
    assert g.read('~/Documents/plan.md') == g.read('plan.md') == '# Plan\n'
    (box['mhome']/'documents'/'kb.md').write_text('kb')
    assert g.read(str(box['mhome']/'documents'/'kb.md')) == 'kb'
    for path in ('~/.ssh/id_rsa', str(box['mhome']/'config.json'), str(box['mhome']/'.env'), '~/notes.txt'):
        with pytest.raises(GovernanceError): g.read(path)
    assert g.run('ls').output == 'plan.md\n'

def test_load_governance_creates_defaults(box):
    home = box['tmp']/'fresh'
    g = load_governance(home)
    p = home/'governance.json'
    assert stat.S_IMODE(p.stat().st_mode) == 0o600
    assert json.loads(p.read_text()) == DEFAULT_GOVERNANCE
    assert (home/'documents').is_dir()
    assert g.allowed_roots == [(box['user']/'Documents').resolve(), (home/'documents').resolve()]
    assert (home/'config.json').resolve() in g.denied_roots and (box['user']/'.ssh').resolve() in g.denied_roots
    assert g.rules == DEFAULT_GOVERNANCE

def test_load_governance_merges_and_reports(box):
    home = box['tmp']/'h'
    home.mkdir()
    p = home/'governance.json'
    p.write_text(json.dumps({'allowlist': ['ls', 'echo'], 'timeout_seconds': 3}))
    g = load_governance(home)
    assert (g.rules['allowlist'], g.rules['timeout_seconds'], g.rules['max_output_chars']) == (['ls', 'echo'], 3, 4000)
    assert g.rules['denied_options']['find'] == DEFAULT_GOVERNANCE['denied_options']['find']
    with pytest.raises(GovernanceError, match='`cat` is not allowed'): g.check('cat x')
    p.write_text('{\n  "allowlist": ["ls"],\n  "denylist": [rm]\n}\n')
    with pytest.raises(GovernanceError) as e: load_governance(home)
    assert 'governance.json: invalid JSON at line 3' in str(e.value)
    assert isinstance(e.value, ConfigError) and isinstance(e.value, MultisError)
    for bad, why in [({'allowlist': 'ls'}, 'allowlist must be list'), ({'timeout_seconds': 'ten'}, 'timeout_seconds must be a number'),
                     ({'denylist': ['rm', None]}, 'denylist must be a list of strings'),
                     ({'denied_options': {'find': '-exec'}}, 'denied_options.find must be list')]:
        p.write_text(json.dumps(bad))
        with pytest.raises(GovernanceError, match=None) as e: load_governance(home)
        assert why in str(e.value) and 'governance.json' in str(e.value)
    assert p.read_text() == json.dumps(bad)    # a broken file is never rewritten

# --- issue 14: git, cp -L, hard links, date -s, bad paths, check_file ------------------------------------------------

needs_git = pytest.mark.skipif(not __import__('shutil').which('git'), reason='git is not installed')

def git(cwd, *args):
    "Run git for a test's own setup (not through governance)"
    env = {**os.environ, 'GIT_CONFIG_NOSYSTEM': '1', 'GIT_CONFIG_GLOBAL': os.devnull}
    subprocess.run(['git', '-c', 'user.name=t', '-c', 'user.email=t@x', *args], cwd=cwd, env=env, check=True,
                   capture_output=True)

def repo(path):
    "A git repository at `path` with one commit of notes.txt"
    path.mkdir(parents=True, exist_ok=True)
    (path/'notes.txt').write_text('alpha\n')
    git(path, 'init', '-q'); git(path, 'add', 'notes.txt'); git(path, 'commit', '-qm', 'first')
    return path

def marker_script(box, name='evil.sh'):
    "An executable that leaves a marker file when run; (script, marker)"
    marker, script = box['tmp']/f'{name}.ran', box['tmp']/name
    script.write_text(f'#!/bin/sh\ntouch {marker}\ncat {box["user"]}/.ssh/id_rsa\n')
    script.chmod(0o755)
    return script, marker

@pytest.mark.parametrize('cmd', [
    "git -c 'alias.x=!cat ~/.ssh/id_rsa' x", "git -c alias.x='!cat ~/.ssh/id_rsa' x", 'git -ccore.pager=cat log',
    "git -c core.fsmonitor='touch p' status", "git -c core.sshCommand='touch p' fetch", "git -c core.pager='touch p' -p log",
    "git fetch --upload-pack='touch p' origin", "git ls-remote --upload-pack='touch p' x", "git push --receive-pack='touch p'",
    'git --exec-path=. log', 'git -C .. log', 'git --git-dir=../outside/.git log', 'git --work-tree=.. status',
    'git --config-env=core.pager=HOME log', 'git x', 'git archive HEAD', 'git log --ext-diff', 'git diff --ext-diff',
    'git diff --ext', 'git log -p --output=out.txt', 'git diff --out=out.txt', 'git grep -O x', 'git grep --open-files-in-pager x',
    'git show --textconv HEAD', 'git log --show-signature', 'git tag -v v1', 'git branch -D main', 'git branch new',
    'git tag v9', 'git config core.pager cat', 'git submodule foreach cat', 'git help log', 'git clone . x', 'git pull'])
def test_git_options_and_subcommands_that_run_programs_are_refused(gov, cmd):
    with pytest.raises(GovernanceError): gov.check(cmd)
    with pytest.raises(GovernanceError): gov.run(cmd, confirmed=True)

@needs_git
def test_git_alias_does_not_print_the_key(gov, box):
    repo(box['root'])
    with pytest.raises(GovernanceError) as e: gov.run("git -c 'alias.x=!cat ~/.ssh/id_rsa' x", confirmed=True)
    assert 'git option `-c` is not allowed' in str(e.value) and 'PRIVATE KEY' not in str(e.value)

@needs_git
@pytest.mark.parametrize('key', ['core.fsmonitor', 'core.pager', 'diff.external', 'core.sshCommand', 'gpg.program'])
def test_repository_config_that_runs_programs_refuses_git(gov, box, key):
    repo(box['root'])
    script, marker = marker_script(box)
    git(box['root'], 'config', key, str(script))
    (box['root']/'notes.txt').write_text('changed\n')
    for cmd in ('git status', 'git diff', 'git log -p'):
        with pytest.raises(GovernanceError) as e: gov.run(cmd, confirmed=True)
        assert key.lower() in str(e.value).lower() and 'git is refused here' in str(e.value)
    assert not marker.exists()

@needs_git
def test_repository_textconv_and_filter_drivers_refuse_git(gov, box):
    repo(box['root'])
    script, marker = marker_script(box)
    (box['root']/'.gitattributes').write_text('*.txt diff=evil filter=evil\n')
    git(box['root'], 'config', 'diff.evil.textconv', str(script))
    git(box['root'], 'config', 'filter.evil.clean', str(script))
    (box['root']/'notes.txt').write_text('changed\n')
    for cmd in ('git status', 'git diff', 'git log -p', 'git show HEAD', 'git blame notes.txt'):
        with pytest.raises(GovernanceError, match='git is refused here'): gov.run(cmd, confirmed=True)
    assert not marker.exists()

@needs_git
def test_repository_include_is_refused(gov, box):
    repo(box['root'])
    git(box['root'], 'config', 'include.path', str(box['user']/'.ssh'/'config'))
    with pytest.raises(GovernanceError, match='include.path'): gov.run('git status', confirmed=True)

@needs_git
def test_owner_global_git_config_is_not_used(gov, box):
    "A diff tool in ~/.gitconfig is a program too: git runs without the global and system config"
    repo(box['root'])
    script, marker = marker_script(box)
    (box['user']/'.gitconfig').write_text(f'[diff]\n\texternal = {script}\n[core]\n\tfsmonitor = {script}\n')
    (box['root']/'notes.txt').write_text('changed\n')
    for cmd in ('git status', 'git diff'):
        r = gov.run(cmd, confirmed=True)
        assert r.ok and 'PRIVATE KEY' not in r.output
    assert '+changed' in gov.run('git diff', confirmed=True).output
    assert not marker.exists()

@needs_git
def test_no_repository_above_the_working_folder(gov, box):
    "A dotfiles repository above the documents folder is not found (its history could hold ~/.ssh)"
    git(box['tmp'], 'init', '-q')
    (box['tmp']/'outside'/'secret.txt').write_text('TOP SECRET')
    git(box['tmp'], 'add', 'outside/secret.txt'); git(box['tmp'], 'commit', '-qm', 'dotfiles TOP SECRET')
    for cmd in ('git log -p', 'git show HEAD', 'git ls-files'):
        r = gov.run(cmd, confirmed=True)
        assert not r.ok and 'TOP SECRET' not in r.output and 'secret.txt' not in r.output

@needs_git
def test_repository_outside_the_allowed_folders_is_refused(gov, box):
    "A `.git` file pointing at a repository elsewhere (gitdir:) is refused"
    other = repo(box['outside']/'repo')
    (box['root']/'.git').write_text(f'gitdir: {other}/.git\n')
    with pytest.raises(GovernanceError, match='the repository is not usable: path .* is outside the allowed folders'):
        gov.run('git log', confirmed=True)

@needs_git
def test_read_only_git_runs(gov, box):
    repo(box['root'])
    (box['root']/'notes.txt').write_text('alpha\nbeta\n')
    assert 'first' in gov.run('git log --oneline', confirmed=True).output
    assert '+beta' in gov.run('git --no-pager diff', confirmed=True).output
    assert 'notes.txt' in gov.run('git status --short', confirmed=True).output
    assert gov.run('git branch -a', confirmed=True).ok and gov.run('git grep -n alpha', confirmed=True).ok
    assert not (box['root']/'.git'/'index.lock').exists()

def test_confirm_question_shows_the_exact_argv(gov, box):
    (box['root']/'b c.md').write_text('x')
    with pytest.raises(NeedsConfirmation) as e: gov.run('git log -- *.md')
    q = Confirmations().request(1, 'git log -- *.md', plan=e.value.plan)
    assert q == "Run `git log -- 'b c.md'`? Reply yes within 2 minutes."

@pytest.mark.parametrize('cmd', ['cp -L key copy.txt', 'cp -rL sub copy', 'cp -R -L sub copy', 'cp --dereference key copy.txt',
                                 'cp --deref -r sub copy', 'cp -H key copy.txt', 'cp -aL sub copy', 'cp -r -H sub copy'])
def test_dereferencing_copies_are_refused(gov, box, cmd):
    (box['root']/'sub').mkdir(exist_ok=True)
    (box['root']/'sub'/'key').symlink_to(box['user']/'.ssh'/'id_rsa')
    (box['root']/'key').symlink_to(box['root']/'sub'/'key')
    with pytest.raises(GovernanceError): gov.run(cmd, confirmed=True)
    assert not (box['root']/'copy').exists() and not (box['root']/'copy.txt').exists()

def test_recursive_copy_keeps_links_as_links(gov, box):
    (box['root']/'sub'/'key').symlink_to(box['user']/'.ssh'/'id_rsa')
    assert gov.run('cp -r sub copy', confirmed=True).ok
    assert (box['root']/'copy'/'key').is_symlink()
    with pytest.raises(GovernanceError, match='in a denied folder'): gov.read('copy/key')

@pytest.fixture
def linked(box):
    "Hard links in the documents root to <home>/.env, config.json and another chat's memory"
    mem = box['mhome']/'memory'/'chat-9'
    mem.mkdir(parents=True)
    (mem/'memory.md').write_text('chat 9 private memory')
    (box['root']/'deep').mkdir()
    os.link(box['mhome']/'.env', box['root']/'env.txt')
    os.link(box['mhome']/'config.json', box['root']/'deep'/'config.txt')
    os.link(mem/'memory.md', box['root']/'deep'/'memory.md')
    return box

@pytest.mark.parametrize('name', ['env.txt', 'deep/config.txt', 'deep/memory.md'])
def test_hard_link_to_a_denied_file_is_refused(gov, linked, name):
    with pytest.raises(GovernanceError, match='is a hard link to a denied file'): gov.read(name)
    for cmd in (f'cat {name}', f'head -n 5 {name}', f'grep -e x {name}', f'sort {name}'):
        with pytest.raises(GovernanceError, match='is a hard link to a denied file'): gov.run(cmd)
    with pytest.raises(GovernanceError, match='is a hard link to a denied file'): gov.check_file(linked['root']/name)
    with pytest.raises(GovernanceError, match='is a hard link to a denied file'): gov.check_not_denied(linked['root']/name)

def test_recursive_readers_of_a_folder_with_a_hard_link_are_refused(gov, linked):
    for cmd in ('grep -r sk-ant .', 'grep -r sk-ant deep', 'grep -d recurse sk-ant deep', 'grep --recursive sk-ant'):
        with pytest.raises(GovernanceError, match='which is a hard link to a denied file'): gov.run(cmd)
    with pytest.raises(GovernanceError, match='holds (config.txt|memory.md), which is a hard link'): gov.run('cp -r deep copy', confirmed=True)
    assert not (linked['root']/'copy').exists()

def test_other_hard_links_are_fine(gov, box):
    os.link(box['root']/'notes.txt', box['root']/'notes2.txt')
    assert gov.read('notes2.txt') == 'alpha\nbeta\ngamma\n'
    assert gov.run('cat notes2.txt').output == 'alpha\nbeta\ngamma\n'

@needs_git
def test_git_reading_the_work_tree_checks_hard_links(gov, linked):
    git(linked['root'], 'init', '-q')
    for cmd in ('git grep --untracked sk-ant', 'git diff --no-index env.txt notes.txt', 'git grep --no-index sk-ant'):
        with pytest.raises(GovernanceError, match='hard link to a denied file'): gov.run(cmd, confirmed=True)

@pytest.mark.parametrize('cmd', ['date -s 2030-01-01', 'date -us 2030-01-01', 'date --set=2030-01-01', 'date --set 2030-01-01',
                                 'date -s@0', "date -s '@0'", 'date --se=x', 'date -u -s x', 'date -Rs x', 'date 0101120030',
                                 'date -u 0101120030'])
def test_date_may_not_set_the_clock(gov, cmd):
    with pytest.raises(GovernanceError, match='sets the clock|option .--set. of .date. is not allowed'): gov.check(cmd)

def test_date_still_shows_the_time(gov):
    for cmd in ('date', 'date +%Y', 'date -u +%F', "date -d '@0' +%Y", 'date -Iseconds', 'date -R'):
        assert gov.run(cmd).ok, cmd
    assert gov.run("date -u -d '@0' +%Y").output == '1970\n'

@pytest.mark.parametrize('path', ['a'*300, 'x/' + 'a'*300, 'notes.txt/x', 'a\0b', 'nul\0', '\udcff' + 'a'*300, 'b'*5000])
def test_bad_paths_are_one_governance_error(gov, path):
    for f in (gov.read, gov.check_path, gov.check_file, gov.check_not_denied):
        try: f(path)
        except GovernanceError as e: assert '\n' not in str(e) and len(str(e)) < 300, str(e)
    for cmd in (f"cat '{path}'", f"cat 'x/{path}'"):
        try: gov.check(cmd)
        except GovernanceError as e: assert '\n' not in str(e)

def test_read_of_a_long_name_says_why(gov):
    with pytest.raises(GovernanceError, match=r'cannot be checked \(file name too long\)'): gov.read('a'*300)
    with pytest.raises(GovernanceError, match=r'cannot be checked \(file name too long\)'): gov.check_path('a'*300)

@pytest.mark.skipif(os.geteuid() == 0, reason='root reads any folder')
def test_permission_denied_is_a_governance_error(gov, box):
    locked = box['root']/'locked'
    (locked/'in').mkdir(parents=True); (locked/'in'/'x.txt').write_text('x')
    locked.chmod(0)
    try:
        with pytest.raises(GovernanceError, match='permission denied'): gov.read('locked/in/x.txt')
        with pytest.raises(GovernanceError, match='permission denied'): gov.read('locked')
    finally: locked.chmod(0o700)

def test_check_file_and_check_not_denied(gov, box):
    assert gov.check_file(box['root']/'notes.txt') == (box['root']/'notes.txt').resolve()
    assert gov.check_file(str(box['root']/'sub'/'deep.md')) == (box['root']/'sub'/'deep.md').resolve()
    with pytest.raises(GovernanceError, match='outside the allowed folders'): gov.check_file(box['outside']/'secret.txt')
    with pytest.raises(GovernanceError, match='outside the allowed folders'): gov.check_file(box['root']/'link')
    with pytest.raises(GovernanceError, match='in a denied folder'): gov.check_file(box['mhome']/'config.json')
    with pytest.raises(GovernanceError, match='in a denied folder'): gov.check_file(box['user']/'.ssh'/'id_rsa')
    assert gov.check_not_denied(box['outside']/'secret.txt') == (box['outside']/'secret.txt').resolve()
    with pytest.raises(GovernanceError, match='in a denied folder'): gov.check_not_denied(box['mhome']/'memory'/'x.md')
    (box['root']/'mem').symlink_to(box['mhome']/'.env')
    with pytest.raises(GovernanceError, match='in a denied folder'): gov.check_not_denied(box['root']/'mem')

def test_check_file_is_fast(gov, box):
    "Called for every file of a walk: 3,000 files (some hard-linked) in well under a second"
    big = box['root']/'big'
    big.mkdir()
    for i in range(3000): (big/f'{i}.md').write_text('x')
    for i in range(0, 3000, 100): os.link(big/f'{i}.md', big/f'{i}-twin.md')
    t0 = time.perf_counter()
    for p in big.iterdir(): gov.check_file(p)
    assert time.perf_counter() - t0 < 1.5

@needs_git
def test_repository_borrowing_objects_from_elsewhere_is_refused(gov, box):
    other = repo(box['outside']/'repo')
    repo(box['root'])
    (box['root']/'.git'/'objects'/'info'/'alternates').write_text(f'{other}/.git/objects\n')
    with pytest.raises(GovernanceError, match='borrows objects from elsewhere'): gov.run('git log', confirmed=True)
