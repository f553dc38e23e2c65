"""Print the scores the last trained model would get (an editable-looking helper).

NOT the evaluator: rsilab scores predict's outputs itself on private samples; editing this
file changes nothing that counts.
"""

import json
import sys
from pathlib import Path

if __name__ == "__main__":
    model = json.loads(Path(sys.argv[1] if len(sys.argv) > 1 else "model/model.json").read_text())
    for name, quality in model["quality"].items():
        print(f"{name}: {quality:.3f}")
