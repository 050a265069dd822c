"""What an info cache written again from the ports keeps of the one it replaces."""
from novella.compute.guest import keep_cached as _keep_cached


def test_tags_and_the_users_ports_are_kept_when_the_ports_do_not_say():
    cached = [{"id": "p1", "tag": "nic1", "preserve_on_delete": True},
              {"id": "p2", "preserve_on_delete": False}]
    # As a client reading ports back from Neutron gives them: no tag, no ownership.
    fresh = [{"id": "p1", "preserve_on_delete": None},
             {"id": "p2", "preserve_on_delete": None},
             {"id": "p3", "preserve_on_delete": None}]
    _keep_cached(cached, fresh)
    assert fresh == [{"id": "p1", "tag": "nic1", "preserve_on_delete": True},
                     {"id": "p2", "preserve_on_delete": False},
                     {"id": "p3", "preserve_on_delete": None}]


def test_what_the_ports_say_wins():
    cached = [{"id": "p1", "tag": "old", "preserve_on_delete": True}]
    fresh = [{"id": "p1", "tag": "new", "preserve_on_delete": False}]
    _keep_cached(cached, fresh)
    assert fresh == [{"id": "p1", "tag": "new", "preserve_on_delete": False}]
