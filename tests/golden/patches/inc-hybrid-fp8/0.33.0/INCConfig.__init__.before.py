def __init__(
    self,
    weight_bits: int,
    group_size: int | tuple[int, int],
    sym: bool = True,
    packing_format: str = DEFAULT_INT_PACKING_FORMAT,
    block_name_to_quantize: str | list[str] | None = None,
    extra_config: dict[str, Any] | None = None,
    data_type: str = "int",
    backend: str = "auto",
) -> None:
    super().__init__()

    data_type = self._normalize_data_type(data_type)
    group_size = INCConfigParser._normalize_group_size(group_size)

    if weight_bits not in self.SUPPORTED_BITS:
        raise ValueError(
            f"Unsupported weight_bits: {weight_bits}, "
            f"currently only support {self.SUPPORTED_BITS}."
        )
    # auto-round mxfp data_type is e.g. "mx_fp4" / "mx_fp4e2m1"; match the
    # "mx_fp" family by substring like auto_round.compressors.is_mx_fp.
    is_mxfp = "mx_fp" in data_type
    if data_type not in self.SUPPORTED_DTYPES and not is_mxfp:
        raise ValueError(
            f"Unsupported data_type: {data_type}, "
            f"currently only support {self.SUPPORTED_DTYPES}."
        )
    if packing_format not in self.SUPPORTED_FORMATS:
        raise ValueError(
            f"Unsupported packing_format: {packing_format}, "
            f"currently only support {self.SUPPORTED_FORMATS}."
        )
    if backend not in self.SUPPORTED_BACKENDS:
        raise ValueError(
            f"Unsupported backend: {backend}, "
            f"currently only support {self.SUPPORTED_BACKENDS}."
        )

    self.weight_bits = weight_bits
    self.group_size = group_size
    self.sym = sym
    self.packing_format = packing_format
    self.block_name_to_quantize = (
        block_name_to_quantize.split(",")
        if isinstance(block_name_to_quantize, str)
        else block_name_to_quantize
    )
    self.extra_config = extra_config
    self.data_type = data_type
    self.backend = backend
    self.pack_factor = Fraction(32, weight_bits)
    self.config_parser = INCConfigParser(self)

    self._validate_supported_quantization()
