"""What ``fp8-experts``' patched code calls: no FP8 layer, ever."""


def detect_fp8_layers(model_name, revision=None):
    return None, set()


def is_layer_fp8(prefix, layers, packed):
    return False


def fp8_linear_method(config):
    raise RuntimeError("the stack fixture has no FP8 layers")
