"""Which execution provider each node of a session runs on, from onnxruntime's own record.

onnxruntime >= 1.23 records its node assignment when the session config entry
``session.record_ep_graph_assignment_info`` is ``"1"``; a fresh session with the same
settings is built for it (as for the optimized graph), so timed sessions stay untouched.
The assignment is taken when the graph is partitioned between providers: it names the
nodes as partitioned (before later fusions), and Memcpy nodes, inserted after it, may not be
in it. A profile gives the placement of the nodes that ran, Memcpy nodes included, from
its Node events (:meth:`Profile.placement`; the profiler names an unnamed node
``<op type>_<node index>``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_ortperf.measuring.session import OrtSession, SessionSettings

RECORD_ASSIGNMENT = "session.record_ep_graph_assignment_info"


def placement_from_assignment(subgraphs: Iterable[Any]) -> dict[str, tuple[str, str]]:
    """The placement in ``InferenceSession.get_provider_graph_assignment_info()``'s result:
    subgraphs with ``ep_name`` and ``get_nodes()`` (each with ``name`` and ``op_type``).

    A node without a name (converters often leave them empty) is keyed ``<op type>#<k>``,
    the k-th unnamed node of that op type in onnxruntime's order: stable from run to run
    of one model, and unchanged by nodes of other op types coming or going."""
    out: dict[str, tuple[str, str]] = {}
    unnamed: dict[str, int] = {}
    for subgraph in subgraphs:
        provider = str(subgraph.ep_name)
        for node in subgraph.get_nodes():
            op, name = str(node.op_type), str(node.name)
            if not name:
                k = unnamed[op] = unnamed.get(op, -1) + 1
                name = f"{op}#{k}"
            out[name] = (op, provider)
    return dict(sorted(out.items()))


def session_placement(session: OrtSession) -> dict[str, tuple[str, str]]:
    """``{node: (op type, provider)}`` of the session's graph as onnxruntime assigned it;
    empty where this onnxruntime cannot tell (before 1.23)."""
    return dict(_placement(session.model_bytes, session.settings))


@functools.lru_cache(maxsize=4)
def _placement(
    model_bytes: bytes, settings: SessionSettings
) -> tuple[tuple[str, tuple[str, str]], ...]:
    from pytest_ortperf.measuring.session import OrtSession

    probe = OrtSession(model_bytes, settings.replace(options={RECORD_ASSIGNMENT: "1"}), "placement")
    read = getattr(probe.sess, "get_provider_graph_assignment_info", None)
    if read is None:
        return ()
    return tuple(placement_from_assignment(read()).items())
