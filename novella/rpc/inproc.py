"""The in-process transport: direct dispatch, casts on a thread pool.

No polling and no sleeps: a call runs the endpoint in the caller's thread; a
cast is queued on a pool. Payloads still go through JSON so nothing depends on
sharing Python objects.
"""
import concurrent.futures
import threading

from novella.rpc import base


class InProcessTransport(base.Transport):
    def __init__(self, url, max_workers=32):
        super().__init__(url)
        self._endpoints = {}
        self._round_robin = {}
        self._lock = threading.Lock()
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_workers, thread_name_prefix="rpc-cast")
        self._pending = set()

    def serve(self, topic, server, endpoint):
        with self._lock:
            self._endpoints[(topic, server)] = endpoint

    def unserve(self, topic, server):
        with self._lock:
            self._endpoints.pop((topic, server), None)

    def _endpoint(self, topic, server):
        with self._lock:
            if server is not None:
                ep = self._endpoints.get((topic, server))
            else:
                # Any server of the topic will do; rotate between them.
                servers = sorted(k for k in self._endpoints if k[0] == topic)
                ep = None
                if servers:
                    i = self._round_robin.get(topic, 0) % len(servers)
                    self._round_robin[topic] = i + 1
                    ep = self._endpoints[servers[i]]
        if ep is None:
            raise base.Timeout(f"no server listening on {topic}.{server}")
        return ep

    def call(self, ctxt, topic, server, method, timeout=None, **kwargs):
        endpoint = self._endpoint(topic, server)
        return self.reply_result(self.dispatch(endpoint, self.message(ctxt, method, kwargs)))

    def cast(self, ctxt, topic, server, method, **kwargs):
        endpoint = self._endpoint(topic, server)
        data = self.message(ctxt, method, kwargs)
        fut = self._pool.submit(self.dispatch, endpoint, data)
        with self._lock:
            self._pending.add(fut)
        fut.add_done_callback(self._done)

    def _done(self, fut):
        with self._lock:
            self._pending.discard(fut)

    def wait_idle(self, timeout=60):
        """Block until every cast queued so far (and those they queue) has run.

        Tests use this instead of polling for a state to appear.
        """
        while True:
            with self._lock:
                pending = list(self._pending)
            if not pending:
                return
            done, not_done = concurrent.futures.wait(pending, timeout=timeout)
            if not_done:
                raise base.Timeout(f"{len(not_done)} casts still running")

    def notify(self, ctxt, publisher_id, event_type, payload, priority="INFO"):
        msg = base.decode(base.encode(self.notification(ctxt, publisher_id, event_type, payload, priority)))
        for cb in list(self.notification_listeners):
            cb(msg)

    def stop(self):
        self._pool.shutdown(wait=True)
