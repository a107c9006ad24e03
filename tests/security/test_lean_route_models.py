"""The EverOS route models as the gateway validates them: from the body's bytes, with the lean
body models (gateway/upstream/models.py, everos_models.py), every body is accepted, refused and
read exactly as the engine's own models read it parsed: the same 422 (message and field) or the
same ids, in the same order, scoping the same fields.

Bodies pydantic's JSON reader cannot read as the engine's parser does (a lone surrogate,
nesting past its limit) are parsed first, and read the same too.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from gateway.attachments.add_body import attachment_items
from gateway.errors import GatewayError
from gateway.identity.named import SESSION, USER, Named
from gateway.upstream.flavors import everos_models as everos
from gateway.upstream.flavors.base import everos_scope
from gateway.upstream.json_body import json_object
from gateway.upstream.models import RouteModel
from gateway.upstream.routes import EngineRoute, named_in_json

NOW = 1_760_000_000_000
LEAN = [everos.ADD, everos.FLUSH, everos.SEARCH, everos.GET, everos.OWN_SEARCH, everos.OWN_ADD]


def _outcome(read: Any) -> tuple[Any, ...]:
    try:
        named: Named = read()
    except GatewayError as exc:
        return ("refused", type(exc).__name__, exc.message, exc.field)
    return ("named", named.ids, sorted(named.scopes), named.app_id, named.project_id)


def engine_reads(model: RouteModel, body: bytes) -> tuple[Any, ...]:
    """The reference: the engine's own model, on the body parsed as the engine parses it
    (`json_object`: orjson, or the standard library for what orjson refuses)."""
    engine = replace(model, lean=None)
    return _outcome(lambda: engine.read(json_object(body), {}, {}))


def gateway_reads(model: RouteModel, body: bytes) -> tuple[Any, ...]:
    route = EngineRoute("POST", "/route", model=model)
    return _outcome(lambda: named_in_json(route, body, {}, {})[0])


def message(**fields: Any) -> dict[str, Any]:
    return {"role": "user", "sender_id": "alice", "timestamp": NOW, "content": "hi", **fields}


def add(*messages: Any, **fields: Any) -> dict[str, Any]:
    return {"session_id": "s1", "messages": list(messages) or [message()], **fields}


def get(filters: Any = None, **fields: Any) -> dict[str, Any]:
    body = {"user_id": "alice", "memory_type": "episode", **fields}
    return body if filters is None else {**body, "filters": filters}


def search(filters: Any = None, **fields: Any) -> dict[str, Any]:
    body = {"user_id": "alice", "query": "x", **fields}
    return body if filters is None else {**body, "filters": filters}


def nested(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"session_id": "deep"}
    for _ in range(depth):
        node = {"AND": [node]}
    return node


TEXT = {"type": "text", "text": "x"}
IMAGE = {"type": "image", "uri": "https://example.com/a.png", "name": "a.png"}
CASES: list[tuple[str, RouteModel, Any]] = [
    ("add", everos.ADD, add()),
    ("add: items, one with a file", everos.ADD, add(message(content=[TEXT, IMAGE, TEXT]))),
    ("add: inline file", everos.ADD, add(message(content=[{"type": "doc", "base64": "eA=="}]))),
    ("add: empty uri is no file", everos.ADD, add(message(content=[{"type": "image", "uri": ""}]))),
    ("add: assistant and tool senders", everos.ADD,
     add(message(role="assistant", sender_id="bot"),
         message(role="tool", sender_id="bot", tool_call_id="c1"))),
    ("add: one sender many times", everos.ADD, add(*[message()] * 40)),
    ("add: content neither text nor items", everos.ADD, add(message(content=5))),
    ("add: content an object", everos.ADD, add(message(content=TEXT))),
    ("add: a bad item among good ones", everos.ADD,
     add(message(content=[TEXT, {"type": "video"}, TEXT]))),
    ("add: an item that is no object", everos.ADD, add(message(content=[TEXT, 5]))),
    ("add: unknown item key", everos.ADD, add(message(content=[{**TEXT, "colour": 1}]))),
    ("add: extras not an object", everos.ADD, add(message(content=[{**TEXT, "extras": 5}]))),
    ("add: bad timestamp before bad content", everos.ADD,
     add(message(timestamp="soon", content=[{"type": "video"}]))),
    ("add: bad content before a bad tool call", everos.ADD,
     add(message(content=[5], tool_calls=[{"id": 1}]))),
    ("add: tool without call id", everos.ADD, add(message(role="tool"))),
    ("add: message not an object", everos.ADD, add(5)),
    ("add: messages not a list", everos.ADD, {"session_id": "s", "messages": 5}),
    ("add: no messages", everos.ADD, {"session_id": "s", "messages": []}),
    ("add: 501 messages", everos.ADD, add(*[message()] * 501)),
    ("add: sender with a slash", everos.ADD, add(message(sender_id="a/b"))),
    ("add: reserved app id", everos.ADD, add(app_id="default_app")),
    ("add: unknown body key ignored", everos.ADD, add(colour=[1, {"a": 2}])),
    ("add: a lone surrogate in text", everos.ADD, add(message(content="a\udc00b"))),
    ("flush", everos.FLUSH, {"session_id": "s1", "app_id": "a"}),
    ("flush: no session", everos.FLUSH, {"app_id": "a"}),
    ("get", everos.GET, get()),
    ("get: agent", everos.GET, {"agent_id": "bot", "memory_type": "agent_case"}),
    ("get: no owner", everos.GET, {"memory_type": "episode"}),
    ("get: unknown key", everos.GET, get(limit=5)),
    ("get: sessions named", everos.GET, get({"session_id": {"in": ["s1", "s2", "s1"]}})),
    ("get: AND and OR", everos.GET,
     get({"OR": [{"session_id": "o1"}, {"session_id": "o2"}],
          "AND": [{"session_id": "a1", "OR": [{"session_id": "a2"}]}, {"session_id": "a3"}]})),
    ("get: refusals under OR and AND", everos.GET,
     get({"OR": [{"colour": 1}], "AND": [{"app_id": "x"}]})),
    ("get: one session a thousand times", everos.GET,
     get({"AND": [{"session_id": "x"}] * 1000})),
    ("get: node not an object", everos.GET, get({"AND": [{"session_id": "x"}, 5]})),
    ("get: AND not a list", everos.GET, get({"AND": {"session_id": "x"}})),
    ("get: null combinators", everos.GET, get({"AND": None, "session_id": "x", "OR": None})),
    ("get: null condition", everos.GET, get({"session_id": None})),
    ("get: bad operators", everos.GET, get({"timestamp": {"like": 1}})),
    ("get: empty in", everos.GET, get({"session_id": {"in": []}})),
    ("get: reserved field", everos.GET, get({"owner_id": "bob"})),
    ("get: filters not an object", everos.GET, get([{"session_id": "x"}])),
    ("get: nested 50 deep", everos.GET, get(nested(50))),
    ("get: nested past the JSON reader's limit", everos.GET, get(nested(150))),
    ("get: nested past the engine's limit", everos.GET, get(nested(300))),
    ("search", everos.SEARCH, search({"session_id": "s1"})),
    ("search: empty query", everos.SEARCH, search(query="")),
    ("search: top_k 0", everos.SEARCH, search(top_k=0)),
    ("search: both owners", everos.SEARCH, search(agent_id="bot")),
    ("search: NaN radius", everos.SEARCH, search(radius=float("nan"))),
    ("search: a big integer", everos.SEARCH, search(top_k=10**30)),
    ("own search", everos.OWN_SEARCH, search({"session_id": "s1"})),
    ("own search: no query, an agent", everos.OWN_SEARCH, {"agent_id": "bot"}),
    ("own search: scope named", everos.OWN_SEARCH, search(app_id="a", project_id="p")),
    ("own search: extras kept", everos.OWN_SEARCH, search(top_k=5, colour=[1])),
    ("own search: query not a string", everos.OWN_SEARCH, search(query=5)),
    ("own search: filters not an object", everos.OWN_SEARCH, search([{"session_id": "x"}])),
    ("own search: refusals under OR", everos.OWN_SEARCH, search({"OR": [{"colour": 1}]})),
    ("own search: nested past the engine's limit", everos.OWN_SEARCH, search(nested(300))),
    ("own add", everos.OWN_ADD, add()),
    ("own add: no session, a user and an agent", everos.OWN_ADD,
     {"messages": [message()], "user_id": "alice", "agent_id": "bot"}),
    ("own add: items, one with a file", everos.OWN_ADD, add(message(content=[TEXT, IMAGE]))),
    ("own add: a message without a role", everos.OWN_ADD,
     add({"type": "image", "uri": "https://e.x/a.png"}, message())),
    ("own add: a role that is no string", everos.OWN_ADD, add(message(role=5))),
    ("own add: a null sender", everos.OWN_ADD, add(message(sender_id=None))),
    ("own add: message not an object", everos.OWN_ADD, add(5)),
    ("own add: messages not a list", everos.OWN_ADD, {"session_id": "s", "messages": 5}),
    ("own add: no messages key", everos.OWN_ADD, {"session_id": "s"}),
    ("own add: a session that is no string", everos.OWN_ADD, add(session_id=5)),
    ("own add: assistant sender", everos.OWN_ADD, add(message(role="assistant", sender_id="b"))),
]


@pytest.mark.parametrize(("model", "body"), [case[1:] for case in CASES],
                         ids=[case[0] for case in CASES])
def test_every_body_reads_from_bytes_as_the_engines_model_reads_it(model: RouteModel,
                                                                    body: Any) -> None:
    raw = json.dumps(body).encode()

    assert gateway_reads(model, raw) == engine_reads(model, raw)


def test_duplicate_keys_read_as_the_engine_reads_them_the_last_wins() -> None:
    raw = b'{"user_id": "bob", "user_id": "alice", "memory_type": "episode"}'

    assert gateway_reads(everos.GET, raw) == engine_reads(everos.GET, raw)
    assert gateway_reads(everos.GET, raw)[1] == [(USER, "user_id", "alice")]


def test_a_body_that_is_no_object_is_refused_as_before() -> None:
    route = EngineRoute("POST", "/route", model=everos.GET)
    for raw in (b"[1, 2]", b'"text"', b"  5", b"{bad"):
        with pytest.raises(GatewayError) as refused:
            named_in_json(route, raw, {}, {})
        with pytest.raises(GatewayError) as parsed:
            json_object(raw)
        assert (refused.value.message, refused.value.field) == (
            parsed.value.message, parsed.value.field)


def test_an_add_keeps_of_its_content_only_the_items_with_files() -> None:
    route = EngineRoute("POST", "/route", model=everos.ADD)
    raw = json.dumps(add(message(content=[TEXT] * 500 + [IMAGE] + [TEXT]),
                         message(content="words"))).encode()

    _, read = named_in_json(route, raw, {}, {})

    assert read is not None and read.lean
    first, second = read.fields["messages"]
    assert first["content"] == [None] * 500 + [IMAGE] + [None]
    assert second == {"role": "user", "sender_id": "alice", "content": None}
    assert read.whole() == json.loads(raw)


def test_a_session_named_a_thousand_times_is_one_id_to_check() -> None:
    raw = json.dumps(get({"AND": [{"session_id": "x"}] * 1000})).encode()

    named, _ = named_in_json(EngineRoute("POST", "/route", model=everos.GET), raw, {}, {})

    assert named.ids == [(USER, "user_id", "alice"), (SESSION, "filters.AND[999].session_id", "x")]


@pytest.mark.parametrize("tree", [
    {"AND": [{"session_id": "a0"}, {"session_id": "a1"}], "OR": [{"session_id": "o0"}]},
    {"OR": [{"session_id": "o0"}], "session_id": "own", "AND": [{"session_id": "a0"},
                                                                {"session_id": "a1"}]},
])
def test_a_filter_tree_is_walked_in_one_order_whatever_order_the_body_wrote(
        tree: dict[str, Any]) -> None:
    walked = [value for _, _, value, _ in everos.filter_ids(tree, "filters")]

    assert walked == [*([] if "session_id" not in tree else ["own"]), "o0", "a1", "a0"]


# --- property: generated bodies -----------------------------------------------------------------
# Mostly valid bodies, each with at most a few values replaced by any JSON: the refusals come
# from every depth of the body, not only from its first field.

_TEXTS = st.sampled_from(["alice", "s1", "", "a/b", "..", "default_app", "x" * 130, "\u00e9"])
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([1.5, 0.0]),
                     _TEXTS)
_JSON = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(_TEXTS, inner, max_size=3)), max_leaves=6)


def _spoiled(valid: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[Any]:
    """`valid` bodies, or one of them with one key's value (or a new key) being any JSON."""
    def spoil(body: dict[str, Any], data: st.DataObject) -> Any:
        key = data.draw(st.sampled_from([*body, "colour"]))
        return {**body, key: data.draw(_JSON)}
    return st.one_of(valid, valid, st.builds(spoil, valid, st.data()), _JSON)


_ITEMS = _spoiled(st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "image", "doc", "video"])},
    optional={"text": _TEXTS, "uri": st.sampled_from(["", "https://e.x/a.png"]),
              "base64": st.just("eA=="), "name": _TEXTS, "ext": st.just("png"),
              "extras": st.dictionaries(_TEXTS, _JSON, max_size=2)}))
_MESSAGES = _spoiled(st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool"]),
     "sender_id": st.sampled_from(["alice", "bot", "a/b"]), "timestamp": st.just(NOW),
     "content": st.one_of(_TEXTS, st.lists(_ITEMS, max_size=4))},
    optional={"tool_call_id": st.just("c1"),
              "tool_calls": st.just([{"id": "c", "function": {"name": "f", "arguments": "{}"}}])}))
_ADDS = _spoiled(st.fixed_dictionaries(
    {"session_id": st.sampled_from(["s1", "s2"]), "messages": st.lists(_MESSAGES, max_size=3)},
    optional={"app_id": st.sampled_from(["a", "default_app"]), "async_mode": st.booleans()}))
_CONDITIONS = st.dictionaries(
    st.sampled_from(["session_id", "timestamp", "sender_id", "parent_type", "app_id", "colour"]),
    st.one_of(_TEXTS, st.dictionaries(st.sampled_from(["eq", "in", "ne", "like"]),
                                      st.one_of(_TEXTS, st.lists(_TEXTS, max_size=3)),
                                      max_size=2), _JSON), max_size=2)
_FILTERS = st.recursive(_CONDITIONS, lambda inner: st.builds(
    lambda own, kids: {**own, **kids}, _CONDITIONS,
    st.dictionaries(st.sampled_from(["AND", "OR"]),
                    st.one_of(st.lists(st.one_of(inner, inner, _SCALARS), max_size=3), st.none(),
                              _SCALARS), max_size=2)), max_leaves=8)
_GETS = _spoiled(st.fixed_dictionaries(
    {"user_id": st.just("alice"), "memory_type": st.just("episode")},
    optional={"page": st.sampled_from([1, 0]), "filters": _FILTERS}))
_SEARCHES = _spoiled(st.fixed_dictionaries(
    {"agent_id": st.just("bot"), "query": st.just("x")},
    optional={"top_k": st.sampled_from([5, 0]), "filters": _FILTERS}))
_FLUSHES = _spoiled(st.fixed_dictionaries({"session_id": st.just("s1")},
                                          optional={"app_id": _TEXTS}))
_PROPERTY = hypothesis_settings(max_examples=400, deadline=None,
                                suppress_health_check=[HealthCheck.too_slow])


@_PROPERTY
@given(body=_ADDS)
def test_generated_adds_read_from_bytes_as_the_engines_model_reads_them(body: Any) -> None:
    raw = json.dumps(body).encode()

    assert gateway_reads(everos.ADD, raw) == engine_reads(everos.ADD, raw)


_OWN_ITEMS = st.one_of(_ITEMS, st.fixed_dictionaries(
    {"type": st.sampled_from(["image_url", "file", "text"])},
    optional={"image_url": st.one_of(_JSON, st.just({"url": "https://e.x/b.png"})),
              "file": st.one_of(_JSON, st.just({"file_data": "eA==", "filename": "f.pdf"})),
              "text": _TEXTS}))
_OWN_MESSAGES = _spoiled(st.fixed_dictionaries(
    {}, optional={"role": st.sampled_from(["user", "assistant", None]),
                  "sender_id": st.sampled_from(["alice", "bot"]), "type": _TEXTS,
                  "uri": st.just("https://e.x/c.png"), "base64": st.just("eA=="),
                  "content": st.one_of(_TEXTS, _OWN_ITEMS, st.lists(_OWN_ITEMS, max_size=4),
                                       _JSON)}))
_OWN_ADDS = _spoiled(st.fixed_dictionaries(
    {"messages": st.lists(_OWN_MESSAGES, max_size=3)},
    optional={"session_id": st.sampled_from(["s1", "s2"]), "app_id": _TEXTS,
              "user_id": st.sampled_from(["alice", "bob"]), "agent_id": st.just("bot")}))


@_PROPERTY
@given(body=_OWN_ADDS)
def test_generated_own_adds_read_from_bytes_as_the_gateways_model_reads_them(body: Any) -> None:
    # The lean twin of /memories/add's model also keeps what the add reads past the ids: the
    # body's scope and every attachment, found where the parsed body has them.
    raw = json.dumps(body).encode()

    assert gateway_reads(everos.OWN_ADD, raw) == engine_reads(everos.OWN_ADD, raw)
    route = EngineRoute("POST", "/route", model=everos.OWN_ADD)
    try:
        _, read = named_in_json(route, raw, {}, {})
    except GatewayError:
        return
    assert read is not None
    assert attachment_items(read.fields) == attachment_items(body)
    assert everos_scope(read.fields) == everos_scope(body)


def test_an_own_add_keeps_of_its_content_only_the_items_with_files() -> None:
    route = EngineRoute("POST", "/route", model=everos.OWN_ADD)
    raw = json.dumps(add(message(content=[TEXT] * 500 + [IMAGE, 7]),
                         message(content="words"))).encode()

    _, read = named_in_json(route, raw, {}, {})

    assert read is not None and read.lean
    first, second = read.fields["messages"]
    assert first["content"] == [None] * 500 + [IMAGE, None]
    assert second["content"] is None and second["sender_id"] == "alice"
    assert read.whole() == json.loads(raw)


@_PROPERTY
@given(model_body=st.one_of(st.tuples(st.just(everos.GET), _GETS),
                            st.tuples(st.just(everos.SEARCH), _SEARCHES),
                            st.tuples(st.just(everos.OWN_SEARCH), _SEARCHES),
                            st.tuples(st.just(everos.FLUSH), _FLUSHES)))
def test_generated_reads_read_from_bytes_as_the_engines_model_reads_them(
        model_body: tuple[RouteModel, Any]) -> None:
    model, body = model_body
    raw = json.dumps(body).encode()

    assert gateway_reads(model, raw) == engine_reads(model, raw)


def test_every_everos_body_model_has_a_lean_twin_here() -> None:
    assert all(model.lean is not None for model in LEAN)
