"""The state Redis as a Redis Cluster:
``redis+cluster://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT…][/0]`` (``rediss+cluster://`` with TLS).

The URL names some nodes of the cluster (any of them: the client asks one for the slot map and
finds the others); a cluster has database 0 only. Every key the gateway writes carries a hash
tag (``state.keys``), so each Lua script and each transaction touches one slot, and a
pipeline over several slots is split per node by redis-py. The Celery broker cannot be a
cluster (kombu has no cluster transport): HBGW_BROKER_URL names a standalone Redis, Sentinel or
RabbitMQ beside it.

Two changes to redis-py's ``RedisCluster``, both for the rule of ``state.connection``:

* a command that timed out is not sent again (it may have run: a fence INCR, a claim); redis-py
  retries timeouts by default. A refused or dropped connection is retried, after the slot map
  was read again, which is how a client finds a promoted replica.
* a pipeline that meets ``NOSCRIPT`` (a promoted replica has an empty script cache: Redis 7
  does not replicate ``SCRIPT LOAD``) loads the script on the node and runs those commands
  again, which is safe since they did not run. Outside pipelines redis-py's ``Script`` does this
  itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import redis
from redis.cluster import ClusterNode, ClusterPipeline, RedisCluster
from redis.exceptions import (
    ClusterDownError,
    NoScriptError,
    SlotNotCoveredError,
)
from redis.exceptions import ConnectionError as RedisConnectionError

from hbgw.core.errors import BadInput
from hbgw.core.masking import mask_url

SCHEMES = {"redis+cluster": False, "rediss+cluster": True}
DEFAULT_PORT = 6379


@dataclass(frozen=True)
class ClusterUrl:
    nodes: tuple[tuple[str, int], ...]
    tls: bool
    username: str | None = None
    password: str | None = None


def is_cluster(url: str) -> bool:
    return urlsplit(url).scheme.lower() in SCHEMES


def parse(url: str) -> ClusterUrl:
    """The parts of a cluster URL, or ``BadInput`` naming what is wrong (password masked)."""
    parts = urlsplit(url)
    auth, _, hosts = parts.netloc.rpartition("@")
    username, _, password = auth.partition(":") if auth else ("", "", "")
    path = [p for p in parts.path.split("/") if p]
    form = "redis+cluster://[:PASSWORD@]HOST:PORT[,HOST:PORT…]"
    if not hosts or path not in ([], ["0"]):
        raise BadInput(
            f"HBGW_REDIS_URL {mask_url(url)} is not a Redis Cluster URL the gateway reads: write "
            f"{form} (a cluster has database 0 only)."
        )
    try:
        nodes = tuple(_host_port(h) for h in hosts.split(",") if h)
    except ValueError as exc:
        raise BadInput(f"HBGW_REDIS_URL {mask_url(url)}: {exc}; ports are numbers.") from exc
    return ClusterUrl(
        nodes,
        SCHEMES[parts.scheme.lower()],
        unquote(username) or None,
        unquote(password) or None,
    )


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host:
        return text, DEFAULT_PORT
    return host, int(port)


class GatewayCluster(RedisCluster):
    """redis-py's cluster client without the retry of timed-out commands, and with pipelines
    that survive a promoted replica's empty script cache."""

    ERRORS_ALLOW_RETRY = (RedisConnectionError, ClusterDownError, SlotNotCoveredError)  # type: ignore[assignment]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.script_texts: dict[str, str] = {}

    def register_script(self, script: Any) -> Any:
        registered = super().register_script(script)
        self.script_texts[registered.sha] = str(registered.script)
        return registered

    def node_of(self, key: str) -> ClusterNode:
        """The primary serving ``key``'s slot."""
        node: ClusterNode = self.get_node_from_key(key)  # type: ignore[no-untyped-call]
        return node

    def pipeline(self, transaction: Any = None, shard_hint: Any = None) -> ClusterPipeline:
        pipe: ClusterPipeline = super().pipeline(transaction, shard_hint)  # type: ignore[no-untyped-call]
        # Re-classed rather than built here: redis-py's constructor arguments for a pipeline
        # change between releases, the class adds behaviour only.
        pipe.__class__ = ScriptReloadingPipeline
        pipe._hbgw_parent = self  # type: ignore[attr-defined]
        return pipe


class ScriptReloadingPipeline(ClusterPipeline):
    """A cluster pipeline whose EVALSHA commands that met NOSCRIPT are run again after the
    script was loaded (they did not run the first time)."""

    _hbgw_parent: GatewayCluster

    def evalsha(self, sha: str, numkeys: int, *keys_and_args: Any) -> Any:
        # redis-py blocks EVALSHA in cluster pipelines (a script might touch several slots);
        # every script of the gateway touches one (``state.keys``), so it is routed by its keys
        # like any other command.
        return self.execute_command("EVALSHA", sha, numkeys, *keys_and_args)  # type: ignore[no-untyped-call]

    def _get_command_keys(self, *args: Any) -> Any:
        # redis-py asks the default node (COMMAND GETKEYS) for the keys of a pipelined EVALSHA:
        # a round trip per script, and an error for ever once that node is dead. The keys are
        # in the arguments.
        if str(args[0]).upper() in ("EVAL", "EVALSHA"):
            return list(args[3 : 3 + int(args[2])])
        return super()._get_command_keys(*args)  # type: ignore[no-untyped-call]

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        stack = [command.args for command in self._execution_strategy.command_queue]
        try:
            results = self._execution_strategy.execute(False)
        except RedisConnectionError:
            # As the cluster client does for a single command: the next call asks another node.
            self.replace_default_node()
            raise
        finally:
            self.reset()  # type: ignore[no-untyped-call]
        for n, (args, result) in enumerate(zip(stack, results, strict=True)):
            if isinstance(result, NoScriptError) and str(args[0]).upper() == "EVALSHA":
                results[n] = self._run_again(args)
        if raise_on_error:
            for result in results:
                if isinstance(result, Exception):
                    raise result
        return results

    def _run_again(self, args: tuple[Any, ...]) -> Any:
        parent = self._hbgw_parent
        text = parent.script_texts.get(str(args[1]))
        if text is None:
            return NoScriptError(f"script {args[1]} was not registered with this client")
        try:
            parent.script_load(text)  # on every primary, the promoted one included
            return parent.execute_command(*args)  # type: ignore[no-untyped-call]
        except redis.RedisError as exc:
            return exc


def _blocking_pool(wait: float) -> type[redis.BlockingConnectionPool]:
    """The blocking pool every node gets, waiting ``wait`` seconds for a free connection (the
    cluster client hands ``timeout`` to the probing ``Redis`` too, which refuses it)."""

    class NodePool(redis.BlockingConnectionPool):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(timeout=wait, **kwargs)  # type: ignore[no-untyped-call]

    return NodePool


def cluster_client(url: str, tls: dict[str, Any], **connection: Any) -> GatewayCluster:
    """A client of the cluster ``url`` names; ``tls``: the SSL options of ``rediss+cluster``;
    ``connection``: each node pool's keyword arguments (as ``state.connection`` builds them,
    ``retry`` included: its retry count becomes the cluster client's)."""
    where = parse(url)
    retry = connection.pop("retry")
    wait = connection.pop("timeout")
    (host, port), *others = where.nodes
    auth = ""
    if where.password:
        auth = f"{quote(where.username or '', safe='')}:{quote(where.password, safe='')}@"
    # The first node as a URL: only then does redis-py give every node the pool class asked
    # for (the blocking pool); the other nodes are more places to read the slot map from.
    first = f"{'rediss' if where.tls else 'redis'}://{auth}{host}:{port}/0"
    return GatewayCluster(
        url=first,
        startup_nodes=[ClusterNode(h, p) for h, p in others],  # type: ignore[no-untyped-call]
        retry=retry,
        connection_pool_class=_blocking_pool(wait),
        **(tls if where.tls else {}),
        **connection,
    )


def is_cluster_client(client: Any) -> bool:
    return isinstance(client, RedisCluster)


def cluster_url_of(client: Any) -> str | None:
    """``redis+cluster://`` and the nodes a cluster client knows, for messages; None for
    another client."""
    if not isinstance(client, RedisCluster):
        return None
    nodes = ",".join(sorted(node.name for node in client.get_primaries()))  # type: ignore[no-untyped-call]
    return f"redis+cluster://{nodes}/"
