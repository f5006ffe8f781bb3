"A toy chat platform, installed as a plugin in the tests: messages arrive as JSON lines in `inbox.jsonl`, replies leave as JSON lines in `outbox.jsonl`"
import asyncio, json, logging
from pathlib import Path
from multis.chat.message import Message
from multis.chat.platform import Platform

log = logging.getLogger('toy_platform')

class ToyPlatform(Platform):
    "The whole platform contract in one small class: config section, secret, start, stop, send"
    name = 'toy'
    defaults = {'folder': '', 'token': '', 'poll_interval': 0.05}
    secrets = {'token': ['TOY_TOKEN']}

    def __init__(self, router, cfg, home=None):
        super().__init__(router, cfg, home)
        self.folder, self.task, self.seen = Path(self.section()['folder']), None, 0

    async def start(self):
        token = self.section()['token']
        if not token: raise ValueError("toy: platforms.toy.token is empty (set it or TOY_TOKEN)")
        self.folder.mkdir(parents=True, exist_ok=True)
        log.warning("toy connected with token %s", token)   # the daemon's log must redact it
        self.task = asyncio.create_task(self._poll())

    async def _poll(self):
        inbox = self.folder/'inbox.jsonl'
        while True:
            lines = inbox.read_text().split('\n')[:-1] if inbox.exists() else []   # whole lines only
            for line in lines[self.seen:]:
                self.seen += 1
                d = json.loads(line)
                m = Message(self.name, d['chat'], d['sender'], d['text'], msg_id=d.get('id'))
                reply = await asyncio.to_thread(self.router.handle, m)
                if reply: await self.send(m.chat_id, reply)
            await asyncio.sleep(float(self.section()['poll_interval']))

    async def stop(self):
        if self.task: self.task.cancel()

    async def send(self, chat_id, text):
        with open(self.folder/'outbox.jsonl', 'a') as f: f.write(json.dumps({'chat': str(chat_id), 'text': text}) + '\n')
