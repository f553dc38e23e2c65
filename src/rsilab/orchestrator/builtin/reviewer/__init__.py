"""The Reviewer in the built-in policy: its rules (:mod:`._rules`: a paired comparison against
the noise floor) and what it does with them (:mod:`._agent`: reviews filed through the tools;
:mod:`._conclude`: the verdict on a verification, a proposal to the Host Controller)."""
