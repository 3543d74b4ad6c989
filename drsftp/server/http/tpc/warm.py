"""A pull's other connections, made while its first GET is out (decision
0043): the first answer gives the file's size, and the other streams then
ask for their shares at once on connections whose TCP and TLS handshakes
are done, two round trips sooner than connections made only then.

Each is opened by a ``HEAD`` of the source (the request's answer is not
needed: aiohttp opens a connection only for a request), and only when the
pull's first connection is new (a warm one answers in one round trip,
nothing to overlap) and no other pull of this remote is running (a tree's
COPYs, which start together, would open more connections than the source
takes from one address: --max-connections-per-ip): the stripes
X-Number-Of-Streams names, or as many as -P auto will start
(auto.first_streams of the first connection's RTT), counted once its TCP
handshake is done: a round trip after the first GET went, two before its
answer comes (TLS, the GET), which is what the warm-ups' own handshakes
take.  A warm-up that fails is no failure: the GET on that stripe says
what is wrong, if anything still is.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ....io.handshake import handshake_rtt, wait_rtt
from ....tuning.count.streams import StreamsConfig, first_streams
from .auto import AUTO_MAX, window_cap
from .copy import Job, Settings4Copy
from .links import Link, key_of
from .remote import Stripe

log = logging.getLogger("drsftp.server")


class Warm:
    """The stripes being warmed up, by index: X-Number-Of-Streams' own, or
    -P auto's next ones, joined to the job (its markers) only when the pull
    takes them (:meth:`take`); the rest are given back at the end."""

    def __init__(self, job: Job, cfg: Settings4Copy) -> None:
        self.job, self.cfg = job, cfg
        self.stripes: dict[int, Stripe] = {}
        self.tasks: dict[int, asyncio.Future[None]] = {}
        self.counting: asyncio.Future[None] | None = None  # -P auto's: the first connection's RTT awaited
        link = job.stripes[0].link
        if link is None or not link.fresh or cfg.links.taken.get(key_of(job.remote, cfg.tls, cfg.timeout), 0) > 1:
            return
        if job.auto:
            self.counting = asyncio.ensure_future(self._count(link))
        else:
            self._open(job.streams)

    async def _count(self, link: Link) -> None:
        """-P auto's first streams once the first connection's TCP handshake gave its RTT."""
        rtt = await wait_rtt(lambda: handshake_rtt(link.sock))
        if len(self.job.stripes) > 1:
            return  # (the pull's streams started without them: a source that answered before its RTT was seen)
        cap = max(1, min(self.cfg.max_streams, AUTO_MAX))
        self._open(first_streams(rtt, window_cap(self.cfg.drs), StreamsConfig(max_streams=cap)))

    def _open(self, n: int) -> None:
        job, cfg = self.job, self.cfg
        for i in range(1, min(n, cfg.max_streams)):
            stripe = job.stripes[i] if i < len(job.stripes) else job.new_stripe(i, cfg, job.guard)
            self.stripes[i] = stripe
            self.tasks[i] = asyncio.ensure_future(_head(job, stripe))

    def __contains__(self, index: int) -> bool:
        return index in self.tasks

    def take(self) -> Stripe | None:
        """The next warmed stripe -P auto adds (joined to the job), None when none is left."""
        i = len(self.job.stripes)
        stripe = self.stripes.get(i)
        if stripe is None:
            return None
        return self.job.join(stripe)

    async def ready(self, index: int) -> None:
        task = self.tasks.get(index)
        if task is not None:
            await task

    async def settle(self) -> None:
        """The pull ended: warm-ups still out cancelled, stripes it never took
        given back; a link whose warm-up was cut is not kept (its connection
        is being closed, or half made: the next COPY would find it dead)."""
        if self.counting is not None:
            self.counting.cancel()
            with contextlib.suppress(BaseException):
                await self.counting
        cut = {i for i, t in self.tasks.items() if not t.done()}
        for i in cut:
            self.tasks[i].cancel()
        for t in self.tasks.values():
            with contextlib.suppress(BaseException):
                await t
        for i, stripe in self.stripes.items():
            if stripe not in self.job.stripes:
                if i in cut and stripe.link is not None:
                    stripe.link.keep = False
                stripe.give_back()


async def _head(job: Job, stripe: Stripe) -> None:
    try:
        resp, _ = await stripe.send("HEAD", job.remote, job.headers, "source")
        resp.release()
    except Exception as exc:  # (optional: the stripe's GET reports a real fault)
        log.debug("http: COPY %s: a warm-up HEAD failed: %s", job.target.href, exc)
