"""The RabbitMQ transport, over kombu.

Layout on the broker (one virtual host per cell, taken from the URL path):

- one topic exchange, ``nova`` by default (``[DEFAULT] control_exchange``);
- for every served (topic, server) two queues bound to it: ``<topic>.<server>``
  (messages for that server) and ``<topic>`` (shared by every server of the
  topic, so RabbitMQ load-balances messages sent to "any server");
- one exclusive ``reply_<id>`` queue per transport, fed through the default
  exchange; a call waits for the reply carrying its correlation id;
- notifications go to the routing keys ``<topic>.<priority>`` (e.g.
  ``versioned_notifications.info``), and a queue of that name is declared so
  an operator can read them as with any OpenStack service. Each is an
  oslo.messaging 2.0 envelope (``{"oslo.version": "2.0", "oslo.message":
  "<json>"}``) whose message carries ``message_id``, ``publisher_id``,
  ``event_type``, ``priority``, ``payload``, ``timestamp`` and the request
  context as ``_context_<key>`` entries: an ``oslo_messaging`` notification
  listener receives every field and the context.

kombu connections are not thread-safe, so each consumer owns a connection and
a thread, and publishing shares one connection under a lock. Requests are
acknowledged on receipt and run on a worker pool of the served (topic,
server): a long call does not hold up the others, and a conductor busy with
many calls to the scheduler cannot starve the scheduler of workers even when
both are served by one transport.
"""
import concurrent.futures
import logging
import socket
import subprocess
import threading
import urllib.parse
import uuid

import kombu

from novella.rpc import base

LOG = logging.getLogger(__name__)

# Routing keys of unversioned (legacy) notifications.
LEGACY_NOTIFICATION_TOPIC = "notifications"


def _conf():
    from novella.conf import CONF
    return CONF


def notification_envelope(msg):
    """The oslo.messaging 2.0 envelope of a notification (``Transport.notification``)."""
    body = {k: v for k, v in msg.items() if k != "context"}
    body["timestamp"] = str(body["timestamp"]).replace("T", " ")
    body["_unique_id"] = uuid.uuid4().hex
    body.update((f"_context_{k}", v) for k, v in (msg.get("context") or {}).items())
    return {"oslo.version": "2.0", "oslo.message": base.encode(body)}


def from_notification_envelope(data):
    """A notification as ``Transport.notification`` makes it, from what the broker holds."""
    msg = base.decode(data) if isinstance(data, (str, bytes)) else data
    if isinstance(msg, dict) and "oslo.message" in msg:
        msg = base.decode(msg["oslo.message"])
    msg.pop("_unique_id", None)
    context = {k[len("_context_"):]: msg.pop(k) for k in list(msg) if k.startswith("_context_")}
    msg.setdefault("context", context)
    return msg


def kombu_url(url):
    """Translate an oslo.messaging style URL to what kombu understands.

    ``rabbit://u:p@h1:5672,u:p@h2:5672/vhost`` becomes a failover list
    ``amqp://u:p@h1:5672/vhost;amqp://u:p@h2:5672/vhost``.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("rabbit", "amqp", "pyamqp"):
        raise ValueError(f"not a RabbitMQ URL: {url!r}")
    hosts = parts.netloc.split(",")
    return ";".join(urllib.parse.urlunsplit(("amqp", h, parts.path, parts.query, ""))
                    for h in hosts)


def vhost_of(url):
    """The virtual host a URL names ('/' when the path is empty)."""
    path = urllib.parse.urlsplit(url).path.lstrip("/")
    return urllib.parse.unquote(path) or "/"


def ensure_vhost(url, rabbitmqctl="rabbitmqctl"):
    """Create the URL's virtual host and give its user full rights there.

    RabbitMQ has no AMQP operation for this, so it goes through
    ``rabbitmqctl`` on the broker's machine (idempotent). Deployments that
    cannot run it create each cell's vhost beforehand with the same two
    commands.
    """
    vhost = vhost_of(url)
    user = urllib.parse.urlsplit(url.split(",")[0]).username or "guest"
    subprocess.run([rabbitmqctl, "add_vhost", vhost], check=True, capture_output=True)
    subprocess.run([rabbitmqctl, "set_permissions", "-p", vhost, urllib.parse.unquote(user),
                    ".*", ".*", ".*"], check=True, capture_output=True)
    return vhost


def delete_vhost(url, rabbitmqctl="rabbitmqctl"):
    """Remove the URL's virtual host and everything in it (tests)."""
    subprocess.run([rabbitmqctl, "delete_vhost", vhost_of(url)], capture_output=True)


class _Consumer(threading.Thread):
    """A connection and a thread draining it; ``on_message`` runs on this thread.

    Queues are declared and consumed before the constructor returns, so a
    message sent right after ``serve()`` or ``listen_notifications()`` is not
    lost.
    """

    def __init__(self, transport, queues, on_message, name):
        super().__init__(name=name, daemon=True)
        self._transport = transport
        self._queues = queues
        self._on_message = on_message
        self._stopping = threading.Event()
        self.conn = transport.connection()
        self._consume()
        self.start()

    def _consume(self):
        self.conn.ensure_connection(max_retries=3)
        self.consumer = kombu.Consumer(self.conn.channel(), queues=self._queues,
                                       on_message=self._deliver)
        self.consumer.qos(prefetch_count=self._transport.prefetch)
        self.consumer.consume()

    def _deliver(self, message):
        if self._stopping.is_set():
            return  # left unacknowledged: requeued when the channel closes
        try:
            self._on_message(message)
        except Exception:  # noqa: BLE001 - a bad message must not kill the consumer
            LOG.exception("failed to handle a message on %s", self.name)

    def run(self):
        healthy = True
        while not self._stopping.is_set():
            try:
                if not healthy:
                    self._reconnect()
                    healthy = True
                    LOG.info("consuming again on %s", self.name)
                self.conn.drain_events(timeout=0.5)
            except socket.timeout:
                continue
            except Exception:  # noqa: BLE001 - the broker went away; try again
                if self._stopping.is_set():
                    break
                if healthy:
                    LOG.warning("lost the broker on %s; reconnecting", self.name, exc_info=True)
                healthy = False
                self._stopping.wait(1)
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001 - closing a dead connection
            pass

    def _reconnect(self):
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001 - closing a dead connection
            pass
        self.conn = self._transport.connection()
        self._consume()

    def stop(self, wait=True):
        """Stop handling messages at once; unacknowledged ones go back to the queue."""
        self._stopping.set()
        if wait and threading.current_thread() is not self:
            # Shutting the socket down wakes drain_events now rather than at
            # its next timeout; the thread then closes the connection.
            try:
                self.conn.connection.transport.sock.shutdown(socket.SHUT_RDWR)
            except Exception:  # noqa: BLE001 - already closed
                pass
            self.join(timeout=5)


class _Waiter:
    __slots__ = ("event", "data")

    def __init__(self):
        self.event = threading.Event()
        self.data = None


class RabbitTransport(base.Transport):
    def __init__(self, url, max_workers=32, exchange=None, prefetch=64):
        super().__init__(url)
        self.kombu_url = kombu_url(url)
        self.max_workers = max_workers
        self.prefetch = prefetch
        name = exchange or _conf().control_exchange
        self.exchange = kombu.Exchange(name, type="topic", durable=False)
        self._lock = threading.Lock()
        self._pub_lock = threading.Lock()
        self._pub_conn = None
        self._producer = None
        self._servers = {}                       # (topic, server) -> (_Consumer, pool)
        self._reply_queue = "reply_" + uuid.uuid4().hex
        self._reply_consumer = None
        self._waiters = {}                       # correlation id -> _Waiter
        self._notify_consumer = None

    def connection(self):
        return kombu.Connection(self.kombu_url, failover_strategy="round-robin")

    # --- publishing ----------------------------------------------------------
    def _publish(self, body, routing_key, exchange=None, declare=(), **props):
        with self._pub_lock:
            if self._producer is None:
                self._pub_conn = self.connection()
                self._producer = kombu.Producer(self._pub_conn)
            self._producer.publish(
                body, exchange=self.exchange if exchange is None else exchange,
                routing_key=routing_key, content_type="application/json",
                content_encoding="utf-8", declare=list(declare), retry=True,
                retry_policy={"max_retries": 3, "interval_start": 0.2,
                              "interval_step": 0.5}, **props)

    @staticmethod
    def _routing_key(topic, server):
        return topic if server is None else f"{topic}.{server}"

    def call(self, ctxt, topic, server, method, timeout=None, **kwargs):
        timeout = timeout or _conf().rpc_response_timeout
        self._ensure_reply_consumer()
        cid = uuid.uuid4().hex
        waiter = self._waiters[cid] = _Waiter()
        try:
            # The expiration drops a request nobody picked up in time, so a
            # server starting later does not run a call its caller gave up on.
            self._publish(self.message(ctxt, method, kwargs), self._routing_key(topic, server),
                          declare=[self.exchange], reply_to=self._reply_queue,
                          correlation_id=cid, expiration=timeout)
            if not waiter.event.wait(timeout):
                raise base.Timeout(f"no reply to {method} from {self._routing_key(topic, server)} "
                                   f"within {timeout}s")
            return self.reply_result(waiter.data)
        finally:
            self._waiters.pop(cid, None)

    def cast(self, ctxt, topic, server, method, **kwargs):
        self._publish(self.message(ctxt, method, kwargs), self._routing_key(topic, server),
                      declare=[self.exchange])

    def notify(self, ctxt, publisher_id, event_type, payload, priority="INFO"):
        msg = base.encode(notification_envelope(
            self.notification(ctxt, publisher_id, event_type, payload, priority)))
        for topic in self._notification_topics(payload):
            key = f"{topic}.{priority.lower()}"
            queue = kombu.Queue(key, self.exchange, routing_key=key, durable=False)
            self._publish(msg, key, declare=[self.exchange, queue])

    @staticmethod
    def _notification_topics(payload):
        # A versioned payload names its object; anything else is legacy.
        if isinstance(payload, dict) and "nova_object.name" in payload:
            return list(_conf().notifications.versioned_notifications_topics)
        return [LEGACY_NOTIFICATION_TOPIC]

    # --- replies -------------------------------------------------------------
    def _ensure_reply_consumer(self):
        if self._reply_consumer is not None:
            return
        with self._lock:
            if self._reply_consumer is None:
                queue = kombu.Queue(self._reply_queue, exclusive=True, auto_delete=True,
                                    durable=False)
                self._reply_consumer = _Consumer(self, [queue], self._on_reply,
                                                 name="rpc-replies")

    def _on_reply(self, message):
        message.ack()
        waiter = self._waiters.get(message.properties.get("correlation_id"))
        if waiter is not None:  # otherwise the caller already timed out
            waiter.data = message.body
            waiter.event.set()

    # --- serving -------------------------------------------------------------
    def serve(self, topic, server, endpoint):
        queues = [kombu.Queue(self._routing_key(topic, server), self.exchange,
                              routing_key=self._routing_key(topic, server), durable=False),
                  kombu.Queue(topic, self.exchange, routing_key=topic, durable=False)]

        pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=self.max_workers, thread_name_prefix=f"rpc-{topic}.{server}")

        def on_request(message):
            props = message.properties
            body = message.body
            message.ack()
            pool.submit(self._handle, endpoint, body,
                        props.get("reply_to"), props.get("correlation_id"))

        consumer = _Consumer(self, queues, on_request, name=f"rpc-{topic}.{server}")
        with self._lock:
            old = self._servers.pop((topic, server), None)
            self._servers[(topic, server)] = (consumer, pool)
        if old is not None:
            old[0].stop()
            old[1].shutdown(wait=False)

    def _handle(self, endpoint, body, reply_to, correlation_id):
        reply = self.dispatch(endpoint, body)
        if reply_to:
            try:
                self._publish(reply, reply_to, exchange="", correlation_id=correlation_id)
            except Exception:  # noqa: BLE001 - the caller will time out
                LOG.exception("could not send a reply to %s", reply_to)

    def unserve(self, topic, server):
        with self._lock:
            served = self._servers.pop((topic, server), None)
        if served is not None:
            served[0].stop()
            served[1].shutdown(wait=False)  # calls already running finish

    # --- notifications ---------------------------------------------------------
    def listen_notifications(self, callback):
        super().listen_notifications(callback)
        with self._lock:
            if self._notify_consumer is not None:
                return
            # A private queue: every listener sees every notification without
            # taking them from the operator's versioned_notifications.* queues.
            topics = list(_conf().notifications.versioned_notifications_topics)
            topics.append(LEGACY_NOTIFICATION_TOPIC)
            queue = kombu.Queue("notifications_listener_" + uuid.uuid4().hex,
                                bindings=[kombu.binding(self.exchange, routing_key=t + ".*")
                                          for t in topics],
                                exclusive=True, auto_delete=True, durable=False)
            self._notify_consumer = _Consumer(self, [queue], self._on_notification,
                                              name="rpc-notifications")

    def _on_notification(self, message):
        message.ack()
        msg = from_notification_envelope(message.body)
        for cb in list(self.notification_listeners):
            try:
                cb(msg)
            except Exception:  # noqa: BLE001 - one listener must not starve others
                LOG.exception("notification listener failed")

    def stop(self):
        with self._lock:
            served = list(self._servers.values())
            consumers = [c for c, _ in served]
            consumers += [c for c in (self._reply_consumer, self._notify_consumer) if c]
            self._servers.clear()
            self._reply_consumer = self._notify_consumer = None
        for c in consumers:
            c.stop(wait=False)
        for c in consumers:
            c.stop()
        for _, pool in served:
            pool.shutdown(wait=True)
        with self._pub_lock:
            if self._pub_conn is not None:
                self._pub_conn.close()
            self._pub_conn = self._producer = None
