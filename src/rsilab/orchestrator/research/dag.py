"""The research DAG of a campaign as a read model: directions, edges, experiments, reviews.

Built from the store in one pass and never written back; load it again to see new records.
The DAG lives on the records (each direction keeps its incoming edges), so this module only
indexes it. A direction's reviews are those naming it, plus those that read its experiments.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from rsilab.records import Direction, DirectionState, EdgeRelation, Experiment, Review
from rsilab.store import StoreReader


class DagEdge(NamedTuple):
    """An edge from a parent direction to a child grown from it."""

    parent_id: str
    child_id: str
    relation: EdgeRelation


@dataclass(frozen=True)
class ResearchDag:
    """One campaign's directions with their edges, experiments and reviews (oldest first)."""

    campaign_id: str
    directions: dict[str, Direction]
    edges: list[DagEdge]
    experiments: dict[str, list[Experiment]] = field(default_factory=dict)
    reviews: dict[str, list[Review]] = field(default_factory=dict)

    @classmethod
    def load(cls, store: StoreReader, campaign_id: str) -> ResearchDag:
        """Read the campaign's directions, experiments and reviews from ``store``.

        Edges to directions outside the campaign (which the tools do not allow to be made)
        are dropped, so every edge joins two nodes of this DAG.
        """
        directions = {d.id: d for d in store.query_as(Direction, campaign_id=campaign_id)}
        edges = [
            DagEdge(e.parent_id, d.id, e.relation)
            for d in directions.values()
            for e in d.parents
            if e.parent_id in directions
        ]
        experiments: dict[str, list[Experiment]] = {d: [] for d in directions}
        by_id: dict[str, Experiment] = {}
        for exp in store.query_as(Experiment, campaign_id=campaign_id):
            experiments.setdefault(exp.direction_id, []).append(exp)
            by_id[exp.id] = exp
        reviews: dict[str, list[Review]] = {d: [] for d in directions}
        for review in store.query_as(Review, campaign_id=campaign_id):
            for direction_id in review_directions(review, by_id):
                reviews.setdefault(direction_id, []).append(review)
        return cls(campaign_id, directions, edges, experiments, reviews)

    # -- navigation ---------------------------------------------------------------------------

    def children(self, direction_id: str) -> list[Direction]:
        """Directions grown from ``direction_id``, oldest first (one entry per child)."""
        ids = dict.fromkeys(e.child_id for e in self.edges if e.parent_id == direction_id)
        return [self.directions[i] for i in ids]

    def parents(self, direction_id: str) -> list[Direction]:
        """Directions ``direction_id`` grew from, in the order its edges list them."""
        ids = dict.fromkeys(e.parent_id for e in self.edges if e.child_id == direction_id)
        return [self.directions[i] for i in ids]

    def ancestors(self, direction_id: str) -> list[Direction]:
        """Every direction ``direction_id`` descends from, nearest first, each once."""
        seen: dict[str, None] = {}
        queue = [p.id for p in self.parents(direction_id)]
        while queue:
            current = queue.pop(0)
            if current not in seen and current != direction_id:
                seen[current] = None
                queue += [p.id for p in self.parents(current)]
        return [self.directions[i] for i in seen]

    def roots(self) -> list[Direction]:
        """Directions with no parent in the DAG."""
        children = {e.child_id for e in self.edges}
        return [d for d in self.directions.values() if d.id not in children]

    def frontier(self) -> list[Direction]:
        """Directions still being worked on: open or promising."""
        return [d for d in self.directions.values() if not d.state.is_finished()]

    def needs_verification(self) -> list[Direction]:
        """Promising directions with no verify child yet: re-run them before proposing."""
        verified = {e.parent_id for e in self.edges if e.relation == EdgeRelation.VERIFY}
        return [
            d
            for d in self.directions.values()
            if d.state == DirectionState.PROMISING and d.id not in verified
        ]

    def relation_counts(self) -> Counter[EdgeRelation]:
        """How many edges of each relation the DAG has."""
        return Counter(e.relation for e in self.edges)

    # -- output -------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready summary for reports: nodes with counts, and edges."""
        return {
            "campaign_id": self.campaign_id,
            "directions": [
                {
                    "id": d.id,
                    "title": d.title,
                    "state": str(d.state),
                    "hypothesis": d.hypothesis,
                    "experiments": len(self.experiments.get(d.id, [])),
                    "reviews": len(self.reviews.get(d.id, [])),
                    "conclusion": d.conclusion,
                }
                for d in self.directions.values()
            ],
            "edges": [
                {"parent_id": e.parent_id, "child_id": e.child_id, "relation": str(e.relation)}
                for e in self.edges
            ],
        }

    def render_text(self) -> str:
        """An indented tree, for people: one line per direction, children indented under it.

        A line reads ``<relation>: <id> '<title>' [<state>] exps=N reviews=M``. A direction
        with several parents is drawn under the first that reaches it; the others show
        ``<relation>: see <id>``.
        """
        lines: list[str] = []
        placed: set[str] = set()

        def place(direction: Direction, relation: str, depth: int) -> None:
            placed.add(direction.id)
            lines.append("  " * depth + f"{relation}{self._line(direction)}")
            for edge in self.edges:
                if edge.parent_id != direction.id:
                    continue
                child = self.directions[edge.child_id]
                if child.id in placed:
                    lines.append("  " * (depth + 1) + f"{edge.relation}: see {child.id}")
                else:
                    place(child, f"{edge.relation}: ", depth + 1)

        for root in self.roots():
            place(root, "", 0)
        for direction in self.directions.values():  # cycles (not made by the tools) stay visible
            if direction.id not in placed:
                place(direction, "", 0)
        return "\n".join(lines)

    def _line(self, d: Direction) -> str:
        exps, reviews = len(self.experiments.get(d.id, [])), len(self.reviews.get(d.id, []))
        return f"{d.id} {d.title!r} [{d.state}] exps={exps} reviews={reviews}"


def review_directions(review: Review, experiments: dict[str, Experiment]) -> list[str]:
    """Directions a review is about: the one it names, else those of the experiments it read."""
    if review.direction_id is not None:
        return [review.direction_id]
    found = (experiments[i].direction_id for i in review.experiment_ids if i in experiments)
    return list(dict.fromkeys(found))
