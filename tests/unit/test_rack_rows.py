"""ClusterView.rack_rows: the nodes of given racks, grouped once and shared by copies."""
import numpy as np

from gangmaster.selectors.cluster import ClusterView, NodeSpec


def racked(racks: str) -> ClusterView:
    return ClusterView([NodeSpec(f"n{i}", rack=f"r{r}", memory_mb=1000, vcores=4) for i, r in enumerate(racks)])


def test_the_nodes_of_the_racks_asked_in_node_order_per_rack():
    view = racked("01020112")
    code = {name: c for c, name in enumerate(view.racks)}
    assert view.rack_rows(np.array([code["r1"]])).tolist() == [1, 5, 6]
    assert sorted(view.rack_rows([code["r2"], code["r0"], code["r2"]]).tolist()) == [0, 2, 3, 4, 7]
    assert view.rack_rows([]).tolist() == []


def test_copies_share_the_grouping():
    view = racked("0011")
    view.rack_rows([0])
    clone = view.copy()
    clone.allocate("n0", clone.free(0))
    assert clone.rack_rows([1]).tolist() == view.rack_rows([1]).tolist() == [2, 3]
    assert clone._by_rack is view._by_rack


def test_a_copy_that_groups_the_racks_groups_them_for_the_view_too():
    """A gang's scratch copy is made before anything asks the view's racks: its grouping is
    the view's, not made again by every copy."""
    view = racked("0110")
    clone = view.copy(keep_indexes=False)
    assert clone.rack_rows([1]).tolist() == [1, 2]
    assert view._by_rack and view._by_rack[0][0] is clone._by_rack[0][0]
    assert view.copy().rack_rows([0]).tolist() == [0, 3]
