"""`POST /chats/{chat_id}/resolve` through HTTP: multi-turn scenarios, canvas, batches, audit rows,
working-state updates, the structured log line, and isolation between users (SPEC §12)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import httpx
import pytest

from gateway.app import Gateway
from gateway.config import Settings
from gateway.store import resolutions
from tests import databases

pytestmark = pytest.mark.both_databases

RESPONSE_KEYS = {
    "resolutionId", "targetAssetIds", "candidateAssetIds", "resolutionMode", "confidence",
    "needsClarification", "reason",
}


class Chat:
    """One user's chat driven like a product would: register, resolve, record results."""

    def __init__(self, client: httpx.AsyncClient, chat_id: str = "chat-1") -> None:
        self.client = client
        self.chat_id = chat_id

    async def asset(self, name: str, *, source: str = "generated",
                    parents: Sequence[str] = (), chat: bool = True) -> str:
        body: dict[str, Any] = {
            "mediaType": "image", "sourceType": source, "displayName": name,
            "originalUrl": f"https://cdn.test/{name}.png", "parentAssetIds": list(parents),
        }
        if chat:
            body["chatId"] = self.chat_id
        response = await self.client.post("/assets", json=body)
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    async def resolve(self, text: str, uploads: Sequence[str] = (),
                      **context: Any) -> dict[str, Any]:
        body: dict[str, Any] = {"text": text, "uploadedAssetIds": list(uploads)}
        if context:
            body["contextPayload"] = context
        response = await self.client.post(f"/chats/{self.chat_id}/resolve", json=body)
        assert response.status_code == 200, response.text
        decided = dict(response.json())
        assert set(decided) == RESPONSE_KEYS
        return decided

    async def results(self, *asset_ids: str) -> None:
        response = await self.client.post(
            f"/chats/{self.chat_id}/results", json={"assetIds": list(asset_ids)}
        )
        assert response.status_code == 201, response.text

    async def state(self) -> dict[str, Any]:
        return dict((await self.client.get(f"/chats/{self.chat_id}/working-state")).json())

    async def audit(self) -> list[dict[str, Any]]:
        response = await self.client.get(f"/chats/{self.chat_id}/resolutions")
        return list(response.json()["resolutions"])


def node(node_id: str, asset_id: str | None, x: float, y: float, **extra: Any) -> dict[str, Any]:
    return {"nodeId": node_id, "assetId": asset_id, "url": f"https://cdn.test/{node_id}.png",
            "x": x, "y": y, "width": 200, "height": 200, **extra}


def grid(ids: list[str]) -> list[dict[str, Any]]:
    """A 2×2 canvas: top-left, top-right, bottom-left, bottom-right."""
    spots = [(0, 0), (300, 0), (0, 300), (300, 300)]
    placed = enumerate(zip(ids, spots, strict=True))
    return [node(f"n{i}", asset_id, x, y) for i, (asset_id, (x, y)) in placed]


async def test_upload_edit_edit_original_latest_and_selection(alice: httpx.AsyncClient) -> None:
    chat = Chat(alice)
    photo = await chat.asset("photo", source="upload")

    turn1 = await chat.resolve("把这张图改成水彩风格", uploads=[photo])
    assert (turn1["resolutionMode"], turn1["targetAssetIds"]) == ("current_upload", [photo])
    assert turn1["needsClarification"] is False
    watercolor = await chat.asset("watercolor", parents=[photo])
    await chat.results(watercolor)

    turn2 = await chat.resolve("再把背景换成蓝色")
    assert (turn2["resolutionMode"], turn2["targetAssetIds"]) == ("working_memory", [watercolor])
    blue = await chat.asset("blue", parents=[watercolor])
    await chat.results(blue)

    turn3 = await chat.resolve("还是改原图吧，加一顶帽子")
    assert (turn3["resolutionMode"], turn3["targetAssetIds"]) == ("text_reference", [photo])
    hat = await chat.asset("hat", parents=[photo])
    await chat.results(hat)

    turn4 = await chat.resolve("上一轮结果再亮一点")
    assert (turn4["resolutionMode"], turn4["targetAssetIds"]) == ("text_reference", [hat])

    turn5 = await chat.resolve("把这张调亮", selectedAssetIds=[watercolor])
    assert (turn5["resolutionMode"], turn5["targetAssetIds"]) == (
        "explicit_selection", [watercolor]
    )

    turn6 = await chat.resolve("不要改选中的，改原图", selectedAssetIds=[blue])
    assert (turn6["resolutionMode"], turn6["targetAssetIds"]) == ("text_reference", [photo])

    state = await chat.state()
    assert state["turnCount"] == 6
    assert state["currentFocusAssetId"] == photo
    assert state["lastResolvedAssetIds"] == [photo]
    assert state["lastReferencedAssetIds"] == [photo]
    assert state["lastUploadedAssetIds"] == [photo]
    assert state["lastGeneratedAssetIds"] == [hat]
    assert state["selectedAssetIds"] == [blue]

    audit = await chat.audit()
    assert [row["id"] for row in audit] == [
        t["resolutionId"] for t in (turn6, turn5, turn4, turn3, turn2, turn1)
    ]
    assert [row["resolutionMode"] for row in audit][::-1] == [
        "current_upload", "working_memory", "text_reference", "text_reference",
        "explicit_selection", "text_reference",
    ]
    newest = audit[0]
    assert newest["rawText"] == "不要改选中的，改原图"
    assert newest["selectedAssetIds"] == [blue]
    assert newest["uploadedAssetIds"] == []
    assert newest["resolvedAssetIds"] == [photo]
    assert newest["candidateAssetIds"] == turn6["candidateAssetIds"]
    assert newest["reasoning"] == turn6["reason"]
    assert newest["confidence"] == turn6["confidence"]


async def test_every_place_of_the_chain_by_turns(alice: httpx.AsyncClient) -> None:
    # upload, one edit, three variants (the client sends them in any order), an edit of the
    # second variant: the chain is photo, edit, (v1 v2 v3), final
    chat = Chat(alice)
    photo = await chat.asset("photo", source="upload")
    await chat.resolve("改成水彩", uploads=[photo])
    edit = await chat.asset("edit", parents=[photo])
    await chat.results(edit)
    variants = [await chat.asset(f"v{i}", parents=[edit]) for i in (1, 2, 3)]
    await chat.results(variants[2], variants[0], variants[1])
    picked = await chat.resolve("第二张再亮一点")
    assert picked["targetAssetIds"] == [variants[1]]
    final = await chat.asset("final", parents=[variants[1]])
    await chat.results(final)

    expected = {
        "the one before the newest": [variants[1]],  # the variant the final was made from
        "上上轮的第三张": [variants[2]],
        "the first variant of the second round": [variants[0]],
        "倒数第三版": [edit],
        "第一次生成的": [edit],
        "我一开始给你的那张": [photo],
        "the picture I began with": [photo],
        "最后两版都不对，再往前一版": [edit],
        "上上轮的三张": variants,
        "最新的": [final],
    }
    # every text is read in the state the final result left (a resolution moves the focus)
    state = {k: v for k, v in (await chat.state()).items() if k not in ("turnCount", "updatedAtMs")}

    async def resolve(text: str) -> dict[str, Any]:
        put = await alice.put(f"/chats/{chat.chat_id}/working-state", json=state)
        assert put.status_code == 200, put.text
        return await chat.resolve(text)

    for text, targets in expected.items():
        decided = await resolve(text)
        assert (decided["resolutionMode"], decided["targetAssetIds"]) == (
            "text_reference", targets
        ), (text, decided["reason"])
    for text in ("上上轮的那张", "five versions back", "第四轮的结果", "第二次生成的那张"):
        decided = await resolve(text)
        assert decided["resolutionMode"] == "clarification", (text, decided)
        assert decided["needsClarification"] is True


async def test_english_original_and_previous_result(alice: httpx.AsyncClient) -> None:
    chat = Chat(alice)
    photo = await chat.asset("photo", source="upload")
    await chat.resolve("make it a watercolour", uploads=[photo])
    edit = await chat.asset("edit", parents=[photo])
    await chat.results(edit)
    original = await chat.resolve("go back to the original and crop it")
    assert original["targetAssetIds"] == [photo]
    latest = await chat.resolve("now take the latest one and add a frame")
    assert (latest["resolutionMode"], latest["targetAssetIds"]) == ("text_reference", [edit])


async def test_the_original_is_found_even_when_registered_outside_the_chat(
    alice: httpx.AsyncClient,
) -> None:
    chat = Chat(alice)
    library_photo = await chat.asset("library", source="upload", chat=False)
    edit = await chat.asset("edit", parents=[library_photo])
    await chat.results(edit)
    decided = await chat.resolve("改原图")
    assert decided["targetAssetIds"] == [library_photo]


async def test_batch_and_ordinals_count_the_last_multi_result_in_registration_order(
    alice: httpx.AsyncClient,
) -> None:
    chat = Chat(alice)
    first, second, third = [await chat.asset(name) for name in ("g1", "g2", "g3")]
    await chat.results(third, first, second)  # the order a client sends does not count
    batch = await chat.resolve("这三张都加上边框")
    assert (batch["resolutionMode"], batch["targetAssetIds"]) == (
        "text_reference", [first, second, third]
    )
    assert (await chat.state())["lastResolvedAssetIds"] == [first, second, third]
    pick = await chat.resolve("第二张再亮一点")
    assert pick["targetAssetIds"] == [second]
    last = await chat.resolve("the last one")
    assert last["targetAssetIds"] == [third]
    single = await chat.asset("single", parents=[second])
    await chat.results(single)
    # "第一张" fits the newest multi-asset turn's first and the first version of the image in
    # focus (single's root): both readings fit, so it asks
    both = await chat.resolve("第一张")
    assert (both["resolutionMode"], both["needsClarification"]) == ("clarification", True)
    assert set(both["candidateAssetIds"]) == {first, second}
    still = await chat.resolve("第三张")  # the newest multi-asset turn still counts
    assert still["targetAssetIds"] == [third]
    everything = await chat.resolve("all of them")
    assert everything["targetAssetIds"] == [first, second, third]


async def test_after_several_results_a_bare_instruction_asks_until_one_is_picked(
    alice: httpx.AsyncClient,
) -> None:
    chat = Chat(alice)
    variants = [await chat.asset(f"v{i}") for i in range(1, 5)]
    await chat.results(variants[2], *variants[:2], variants[3])  # any order the client sends
    bare = await chat.resolve("再亮一點")  # traditional script, no reference
    assert bare["needsClarification"] and bare["candidateAssetIds"] == variants
    third = await chat.resolve("the third variant")
    assert (third["resolutionMode"], third["targetAssetIds"]) == ("text_reference", [variants[2]])
    again = await chat.resolve("再亮一点")  # now the picked one is the focus
    assert (again["resolutionMode"], again["targetAssetIds"]) == ("working_memory", [variants[2]])
    row = await chat.resolve(
        "第二排第一個",
        canvasImageNodes=[node(f"n{i}", v, (i % 2) * 300, (i // 2) * 300)
                          for i, v in enumerate(variants)],
    )
    assert row["targetAssetIds"] == [variants[2]]


async def test_several_uploads_in_one_turn_are_all_targets(alice: httpx.AsyncClient) -> None:
    chat = Chat(alice)
    a, b = await chat.asset("a", source="upload"), await chat.asset("b", source="upload")
    decided = await chat.resolve("把它们拼在一起", uploads=[a, b])
    assert (decided["resolutionMode"], decided["targetAssetIds"]) == ("current_upload", [a, b])
    state = await chat.state()
    assert state["lastUploadedAssetIds"] == [a, b]


async def test_canvas_positions_and_ordinals_read_the_request_canvas(
    alice: httpx.AsyncClient,
) -> None:
    chat = Chat(alice)
    ids = [await chat.asset(f"c{i}", source="canvas") for i in range(4)]
    canvas = grid(ids)
    cases = {
        "左上那张": [ids[0]],
        "右下那张换成夜景": [ids[3]],
        "the top-right one": [ids[1]],
        "第三张": [ids[2]],
        "最后一张": [ids[3]],
    }
    for text, expected in cases.items():
        decided = await chat.resolve(text, canvasImageNodes=canvas)
        assert (decided["resolutionMode"], decided["targetAssetIds"]) == (
            "text_reference", expected
        ), text
    state = await chat.state()
    assert state["activeCanvasNodeIds"] == ["n3"]
    assert [n["nodeId"] for n in state["lastCanvasSnapshot"]] == ["n0", "n1", "n2", "n3"]
    assert state["lastCanvasSnapshot"][1] == {
        "nodeId": "n1", "assetId": ids[1], "url": "https://cdn.test/n1.png", "x": 300, "y": 0,
        "width": 200, "height": 200, "title": None, "isSelected": False,
    }
    await chat.resolve("第二张")  # no canvas this turn: the last one is kept
    assert (await chat.state())["lastCanvasSnapshot"] == state["lastCanvasSnapshot"]


async def test_a_selected_canvas_node_is_the_selection(alice: httpx.AsyncClient) -> None:
    chat = Chat(alice)
    ids = [await chat.asset(f"c{i}", source="canvas") for i in range(4)]
    canvas = grid(ids)
    canvas[2]["isSelected"] = True
    by_flag = await chat.resolve("把这张调亮", canvasImageNodes=canvas)
    assert (by_flag["resolutionMode"], by_flag["targetAssetIds"]) == (
        "explicit_selection", [ids[2]]
    )
    by_node_id = await chat.resolve(
        "把这张调亮", canvasImageNodes=grid(ids), selectedNodeIds=["n1"]
    )
    assert by_node_id["targetAssetIds"] == [ids[1]]
    assert (await chat.audit())[0]["selectedAssetIds"] == [ids[1]]


async def test_an_ambiguous_position_asks_for_clarification_without_a_model(
    alice: httpx.AsyncClient,
) -> None:
    chat = Chat(alice)
    ids = [await chat.asset(f"c{i}", source="canvas") for i in range(4)]
    decided = await chat.resolve("左边那张", canvasImageNodes=grid(ids))
    assert decided["resolutionMode"] == "clarification"
    assert decided["needsClarification"] is True
    assert decided["targetAssetIds"] == []
    assert set(decided["candidateAssetIds"]) == {ids[0], ids[2]}
    state = await chat.state()
    assert state["turnCount"] == 1
    assert state["lastResolvedAssetIds"] == [] and state["currentFocusAssetId"] is None


async def test_clarification_keeps_the_previous_focus(alice: httpx.AsyncClient) -> None:
    chat = Chat(alice)
    photo = await chat.asset("photo", source="upload")
    await chat.resolve("修一下", uploads=[photo])
    decided = await chat.resolve("第五张")  # nothing to count
    assert decided["needsClarification"] is True
    state = await chat.state()
    assert state["currentFocusAssetId"] == photo
    assert state["lastResolvedAssetIds"] == [photo]
    assert state["turnCount"] == 2


async def test_focus_policy_original_targets_the_chain_root(alice: httpx.AsyncClient) -> None:
    chat = Chat(alice)
    photo = await chat.asset("photo", source="upload")
    edit = await chat.asset("edit", parents=[photo])
    await chat.results(edit)
    decided = await chat.resolve("再来一次", focusPolicy="original")
    assert decided["targetAssetIds"] == [photo]


async def test_one_log_line_per_resolution_with_the_counts(
    alice: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    chat = Chat(alice, "chat-log")
    a, b = await chat.asset("a", source="upload"), await chat.asset("b")
    caplog.set_level(logging.INFO, logger="gateway.resolution")
    await chat.resolve("把这张调亮", uploads=[a], selectedAssetIds=[b])
    lines = [r for r in caplog.records if r.name == "gateway.resolution"]
    assert len(lines) == 1
    assert lines[0].getMessage() == "target resolved: explicit_selection"
    assert lines[0].resolution == {  # type: ignore[attr-defined]
        "chatId": "chat-log",
        "hasCurrentUpload": True,
        "selectedAssetCount": 1,
        "candidateAssetCount": 1,
        "resolvedAssetCount": 1,
        "resolutionMode": "explicit_selection",
        "confidence": 95,
        "needsClarification": False,
    }
    assert "把这张调亮" not in caplog.text  # the user's words stay out of the log


async def test_a_failed_state_update_leaves_no_audit_row(
    app: Gateway, alice: httpx.AsyncClient, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = Chat(alice)
    photo = await chat.asset("photo", source="upload")

    async def broken(*args: Any) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(resolutions.working_state, "write_state", broken)
    response = await alice.post(
        "/chats/chat-1/resolve", json={"text": "x", "uploadedAssetIds": [photo]}
    )
    assert response.status_code == 500
    [(count,)] = databases.rows(settings.storage.database,
                                "SELECT count(*) FROM message_target_resolutions")
    assert count == 0
    monkeypatch.undo()
    assert (await chat.state())["turnCount"] == 0


# --- isolation ---------------------------------------------------------------------------------


async def test_another_users_assets_in_the_same_chat_id_are_never_candidates(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient
) -> None:
    bobs_chat = Chat(bob, "shared")
    bob_ids = [await bobs_chat.asset(f"b{i}") for i in range(3)]
    await bobs_chat.results(*bob_ids)
    await bobs_chat.resolve("这三张都要")

    chat = Chat(alice, "shared")
    mine = await chat.asset("mine", source="upload")
    for text in ("这三张都要", "上一轮结果", "改原图", "第二张", "all of them", "随便改改"):
        decided = await chat.resolve(text)
        assert not set(decided["candidateAssetIds"]) & set(bob_ids), text
        assert not set(decided["targetAssetIds"]) & set(bob_ids), text
        assert set(decided["candidateAssetIds"]) <= {mine}, text
    assert len(await bobs_chat.audit()) == 1
    assert (await bobs_chat.state())["turnCount"] == 1


@pytest.mark.parametrize(
    ("where", "field"),
    [("uploads", "uploadedAssetIds"), ("selected", "contextPayload.selectedAssetIds")],
)
async def test_naming_another_users_asset_explicitly_is_422_and_not_audited(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient, where: str, field: str
) -> None:
    bobs = await Chat(bob).asset("bobs")
    body: dict[str, Any] = {"text": "改这张"}
    if where == "uploads":
        body["uploadedAssetIds"] = [bobs]
    else:
        body["contextPayload"] = {"selectedAssetIds": [bobs]}
    response = await alice.post("/chats/chat-1/resolve", json=body)
    assert response.status_code == 422
    assert response.json()["error"]["field"] == field
    assert await Chat(alice).audit() == []
    assert (await bob.get(f"/assets/{bobs}")).status_code == 200
    assert (await alice.get(f"/assets/{bobs}")).status_code == 404


async def test_another_users_asset_on_the_canvas_is_never_a_target(
    alice: httpx.AsyncClient, bob: httpx.AsyncClient
) -> None:
    bobs = await Chat(bob).asset("bobs")
    chat = Chat(alice)
    mine = await chat.asset("mine", source="canvas")
    canvas = [node("left", bobs, 0, 0, isSelected=True), node("right", mine, 300, 0)]
    left = await chat.resolve("左边那张", canvasImageNodes=canvas)
    assert left["needsClarification"] is True
    assert bobs not in left["targetAssetIds"] and bobs not in left["candidateAssetIds"]
    right = await chat.resolve("右边那张", canvasImageNodes=canvas)
    assert right["targetAssetIds"] == [mine]
    everything = await chat.resolve("all of them", canvasImageNodes=canvas)
    assert bobs not in everything["targetAssetIds"] + everything["candidateAssetIds"]
    audit_ids = {i for row in await chat.audit() for key in
                 ("selectedAssetIds", "candidateAssetIds", "resolvedAssetIds") for i in row[key]}
    assert bobs not in audit_ids
    snapshot = (await chat.state())["lastCanvasSnapshot"]
    assert snapshot[0]["assetId"] is None


# --- input validation --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "text"),
        ({"text": 5}, "text"),
        ({"text": "x", "uploadedAssetIds": "a"}, "uploadedAssetIds"),
        ({"text": "x", "contextPayload": {"focusPolicy": "newest"}}, "contextPayload.focusPolicy"),
        ({"text": "x", "contextPayload": {"canvasImageNodes": [{"nodeId": "n", "url": "u"}]}},
         "contextPayload.canvasImageNodes.0.x"),
        ({"text": "x", "contextPayload": {"canvasImageNodes": [
            {"nodeId": "n", "url": "u", "x": "NaN", "y": 0}]}},
         "contextPayload.canvasImageNodes.0.x"),
    ],
)
async def test_invalid_resolve_request_is_422_naming_the_field(
    alice: httpx.AsyncClient, body: dict[str, Any], field: str
) -> None:
    response = await alice.post("/chats/chat-1/resolve", json=body)
    assert response.status_code == 422
    assert response.json()["error"]["field"] == field
    assert await Chat(alice).audit() == []
