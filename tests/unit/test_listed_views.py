"""Views of listed objects made once per object version (``adapters/listed_views.ListedViews``): the
warm API lists every Workload and Job for each start estimate."""

from __future__ import annotations

from typing import Any

from topogov.adapters.listed_views import ListedViews


def obj(uid: str, version: str, **more: Any) -> dict[str, Any]:
    return {"metadata": {"uid": uid, "resourceVersion": version, "name": uid}, **more}


def made(body: dict[str, Any]) -> dict[str, Any]:
    return {"name": body["metadata"]["name"], "spec": body.get("spec")}


def test_an_unchanged_object_keeps_its_view_and_a_changed_one_gets_a_new_one() -> None:
    views = ListedViews(made)
    first = views.views("ns", [obj("a", "1", spec=1), obj("b", "1", spec=1)])
    second = views.views("ns", [obj("a", "1", spec=1), obj("b", "2", spec=2)])
    assert second[0] is first[0]
    assert second[1] is not first[1] and second[1] == {"name": "b", "spec": 2}
    assert views.made == 3


def test_an_object_gone_from_a_listing_is_forgotten() -> None:
    views = ListedViews(made)
    views.views("ns", [obj("a", "1"), obj("b", "1")])
    views.views("ns", [obj("a", "1")])
    views.views("ns", [obj("a", "1"), obj("b", "1")])  # b back (same uid and version): made again
    assert views.made == 3


def test_namespaces_are_kept_apart_and_order_is_the_listings() -> None:
    views = ListedViews(made)
    views.views("one", [obj("a", "1")])
    assert [v["name"] for v in views.views("two", [obj("b", "1"), obj("a", "1")])] == ["b", "a"]
    assert views.made == 3  # "a" listed in another namespace is another listing's object


def test_an_object_without_uid_or_version_is_made_each_time() -> None:
    views = ListedViews(made)
    views.views("ns", [{"metadata": {"name": "x"}}, obj("y", "")])
    views.views("ns", [{"metadata": {"name": "x"}}, obj("y", "")])
    assert views.made == 4
