"""Seed 004's entity aliases through the services: an admin names an entity's other
names, and a search naming one finds memories that say another."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import caller
from tests.support import eventually

pytestmark = pytest.mark.e2e


async def test_a_search_naming_an_entity_finds_its_other_names(services: dict[str, str]) -> None:
    ana = caller()
    admin = caller(org=ana.org, member="root", roles=("admin",))
    other_org = caller(roles=("admin",))
    command, recall = services["command"], services["recall"]
    async with httpx.AsyncClient(timeout=10) as http:
        saved = await http.post(
            f"{command}/v1/memories",
            headers=ana.headers,
            json={"content": "Our k8s cluster lives in Frankfurt."},
        )
        item = saved.json()["item_id"]

        async def search() -> list[dict[str, object]]:
            r = await http.post(
                f"{recall}/v1/search",
                headers=ana.headers,
                json={"query": "Which region hosts Kubernetes?"},
            )
            assert r.status_code == 200, r.text
            return list(r.json()["memories"])

        async def listed() -> bool:
            r = await http.get(f"{recall}/v1/memories/{item}", headers=ana.headers)
            return r.status_code == 200

        await eventually(listed, what="the memory in the read model")
        assert await search() == []  # no word in common, and no aliases yet

        denied = await http.put(
            f"{recall}/v1/aliases/Kubernetes", headers=ana.headers, json={"aliases": ["k8s"]}
        )
        assert (denied.status_code, denied.json()["code"]) == (403, "forbidden")
        bad = await http.put(
            f"{recall}/v1/aliases/Kubernetes", headers=admin.headers, json={"aliases": ["!!"]}
        )
        assert bad.status_code == 422
        r = await http.put(
            f"{recall}/v1/aliases/Kubernetes",
            headers=admin.headers,
            json={"aliases": ["k8s", "kube", "K8S"]},
        )
        assert r.status_code == 200, r.text
        assert (r.json()["entity"], r.json()["aliases"]) == ("Kubernetes", ["k8s", "kube"])

        [hit] = await search()
        assert hit["id"] == item and hit["why"] == ["alias#1"]
        listed_aliases = await http.get(f"{recall}/v1/aliases", headers=ana.headers)
        assert [e["entity"] for e in listed_aliases.json()["entities"]] == ["Kubernetes"]

        taken = await http.put(
            f"{recall}/v1/aliases/Container%20platform",
            headers=admin.headers,
            json={"aliases": ["KUBE"]},
        )
        assert (taken.status_code, taken.json()["code"], taken.json()["entity"]) == (
            409,
            "alias_taken",
            "Kubernetes",
        )
        # Another org's aliases are its own.
        theirs = await http.get(f"{recall}/v1/aliases", headers=other_org.headers)
        assert theirs.json()["entities"] == []
        # A name may hold a slash; an entity set again in another case is respelt.
        slashed = await http.put(
            f"{recall}/v1/aliases/CI/CD/", headers=admin.headers, json={"aliases": ["pipelines"]}
        )
        assert (slashed.status_code, slashed.json()["entity"]) == (200, "CI/CD")
        respelt = await http.put(
            f"{recall}/v1/aliases/KUBERNETES", headers=admin.headers, json={"aliases": ["k8s"]}
        )
        assert respelt.status_code == 200, respelt.text
        names = await http.get(f"{recall}/v1/aliases", headers=ana.headers)
        assert [e["entity"] for e in names.json()["entities"]] == ["CI/CD", "KUBERNETES"]
        gone = await http.delete(f"{recall}/v1/aliases/Kubernetes", headers=admin.headers)
        assert gone.status_code == 204
        again = await http.delete(f"{recall}/v1/aliases/Kubernetes", headers=admin.headers)
        assert (again.status_code, again.json()["code"]) == (404, "not_found")
        assert await search() == []
